#include "checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/safetensors_header.h"
#include "core/base/atomic_file.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/tensor/dtype.h"

namespace weft::ckpt {
namespace {

// The format is little-endian; weft hosts are too, so values are memcpy'd.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little-endian");

// The reference reader refuses larger headers; so do we, before allocating.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Element size of every dtype the format defines (0: unknown), so files
// holding dtypes weft cannot convert still get their structure checked.
int64_t ElementSize(const std::string& dtype) {
  static const std::map<std::string, int64_t>* sizes = new std::map<std::string, int64_t>{
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  auto it = sizes->find(dtype);
  return it == sizes->end() ? 0 : it->second;
}

bool Convertible(const std::string& dtype) {
  return dtype == "F32" || dtype == "BF16" || dtype == "F16";
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Product of dims, or -1 when it would overflow int64.
int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

std::string Encode(const std::vector<float>& values, const std::string& dtype) {
  std::string out;
  if (dtype == "F32") {
    out.resize(values.size() * 4);
    // An empty tensor's vector may have no buffer: memcpy from null is UB.
    if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
    return out;
  }
  out.resize(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits = dtype == "BF16" ? FloatToBf16Bits(values[i]) : FloatToF16Bits(values[i]);
    std::memcpy(out.data() + 2 * i, &bits, 2);
  }
  return out;
}

void Decode(const std::string& bytes, const std::string& dtype, std::vector<float>& out) {
  if (dtype == "F32") {
    out.resize(bytes.size() / 4);
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * 4);
    return;
  }
  out.resize(bytes.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, bytes.data() + 2 * i, 2);
    out[i] = dtype == "BF16" ? Bf16BitsToFloat(bits) : F16BitsToFloat(bits);
  }
}

absl::Status CheckWritable(const std::map<std::string, HostTensor>& tensors,
                           const SafetensorsWriteOptions& options) {
  if (!Convertible(options.dtype)) {
    return InvalidArgument(absl::StrCat("safetensors dtype \"", options.dtype, "\""),
                           "\"F32\", \"BF16\" or \"F16\"");
  }
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") {
      return InvalidArgument("a tensor named \"__metadata__\"",
                             "tensor names other than the format's metadata key",
                             "rename the tensor");
    }
    const int64_t n = NumElements(t.shape);
    if (n < 0 || t.values.size() != static_cast<size_t>(n)) {
      return InvalidArgument(absl::StrCat("tensor '", name, "' has shape ", ShapeText(t.shape),
                                          " but ", t.values.size(), " values"),
                             "values.size() == product of the shape (1 for a scalar, shape {})");
    }
  }
  return absl::OkStatus();
}

// The buffer must be exactly tiled by the tensors: sorted by offset, each
// starts where the previous ended, and the last ends at the buffer's end.
absl::Status CheckLayout(const SafetensorsHeader& header, int64_t buffer_bytes,
                         const std::string& path) {
  std::vector<std::pair<const std::string*, const SafetensorsEntry*>> order;
  for (const auto& [name, e] : header.tensors) {
    const int64_t size = ElementSize(e.dtype);
    if (size == 0) {
      return InvalidArgument(
          absl::StrCat("'", path, "': tensor '", name, "' has unknown dtype \"", e.dtype, "\""),
          "a safetensors dtype (F32, BF16, F16, I64, ...)",
          "the file may come from a newer safetensors version");
    }
    const int64_t n = NumElements(e.shape);
    if (n < 0 || n > std::numeric_limits<int64_t>::max() / size || e.end - e.begin != n * size) {
      return InvalidArgument(
          absl::StrCat("'", path, "': tensor '", name, "' (", e.dtype, " ", ShapeText(e.shape),
                       ") has data_offsets [", e.begin, ", ", e.end, "] = ", e.end - e.begin,
                       " bytes"),
          absl::StrCat(n < 0 ? "a shape whose size fits in int64"
                             : absl::StrCat(n, " elements x ", size, " bytes = ", n * size)),
          "the file is corrupt");
    }
    if (e.end > buffer_bytes) {
      return InvalidArgument(absl::StrCat("'", path, "': tensor '", name, "' ends at byte ", e.end,
                                          " of the buffer, which has only ", buffer_bytes),
                             "offsets within the file", "the file is truncated");
    }
    order.emplace_back(&name, &e);
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second->begin, a.second->end) < std::tie(b.second->begin, b.second->end);
  });
  int64_t cursor = 0;
  const std::string* previous = nullptr;
  for (const auto& [name, e] : order) {
    if (e->begin < cursor) {
      return InvalidArgument(absl::StrCat("'", path, "': tensors '", *previous, "' and '", *name,
                                          "' overlap at byte ", e->begin),
                             "disjoint data_offsets", "the file is corrupt");
    }
    if (e->begin > cursor) {
      return InvalidArgument(absl::StrCat("'", path, "': bytes [", cursor, ", ", e->begin,
                                          ") before tensor '", *name, "' belong to no tensor"),
                             "tensors packed without holes", "the file is corrupt");
    }
    cursor = e->end;
    previous = name;
  }
  if (cursor != buffer_bytes) {
    return InvalidArgument(absl::StrCat("'", path, "': ", buffer_bytes - cursor,
                                        " trailing bytes after the last tensor"),
                           absl::StrCat("a ", cursor, "-byte buffer"), "the file is corrupt");
  }
  return absl::OkStatus();
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

absl::Status ReadExactly(std::FILE* f, int64_t offset, std::string& out, const std::string& path) {
  if (std::fseek(f, static_cast<long>(offset), SEEK_SET) != 0 ||
      std::fread(out.data(), 1, out.size(), f) != out.size()) {
    return InvalidArgument(
        absl::StrCat("'", path, "': cannot read ", out.size(), " bytes at offset ", offset),
        "a complete file", "the file is truncated or was modified while read");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteSafetensors(const std::string& path,
                              const std::map<std::string, HostTensor>& tensors,
                              const SafetensorsWriteOptions& options) {
  WEFT_RETURN_IF_ERROR(CheckWritable(tensors, options));
  const int64_t size = ElementSize(options.dtype);
  SafetensorsHeader header;
  header.metadata = options.metadata;
  int64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const int64_t bytes = static_cast<int64_t>(t.values.size()) * size;
    header.tensors[name] = {options.dtype, t.shape, offset, offset + bytes};
    offset += bytes;
  }
  std::string json = SerializeSafetensorsHeader(header);
  // Pad so the buffer starts on an 8-byte boundary (8 + N is a multiple of 8).
  json.append((8 - json.size() % 8) % 8, ' ');
  char length[8];
  const uint64_t n = json.size();
  std::memcpy(length, &n, 8);
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> file, AtomicFileWriter::Open(path));
  WEFT_RETURN_IF_ERROR(file->Write(absl::string_view(length, 8)));
  WEFT_RETURN_IF_ERROR(file->Write(json));
  for (const auto& [name, t] : tensors) {
    WEFT_RETURN_IF_ERROR(file->Write(Encode(t.values, options.dtype)));
  }
  return file->Commit();
}

absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (f == nullptr) {
    const int err = errno;
    const std::string what = absl::StrCat("cannot open '", path, "': ", std::strerror(err));
    if (err == ENOENT) return NotFound(what, "an existing safetensors file", "check the path");
    return InvalidArgument(what, "a readable file");
  }
  std::fseek(f.get(), 0, SEEK_END);
  const int64_t file_bytes = std::ftell(f.get());
  if (file_bytes < 8) {
    return InvalidArgument(absl::StrCat("'", path, "' has ", file_bytes, " bytes"),
                           "at least 8 (the header length)",
                           "the file is truncated or not safetensors");
  }
  std::string length(8, '\0');
  WEFT_RETURN_IF_ERROR(ReadExactly(f.get(), 0, length, path));
  uint64_t n;
  std::memcpy(&n, length.data(), 8);
  if (n > kMaxHeaderBytes || n > static_cast<uint64_t>(file_bytes - 8)) {
    return InvalidArgument(
        absl::StrCat("'", path, "' declares a ", n, "-byte header in a ", file_bytes, "-byte file"),
        absl::StrCat("a header of at most ", std::min<uint64_t>(kMaxHeaderBytes, file_bytes - 8),
                     " bytes"),
        "the file is truncated or not safetensors");
  }
  std::string json(n, '\0');
  WEFT_RETURN_IF_ERROR(ReadExactly(f.get(), 8, json, path));
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(json);
  if (!header.ok()) return Annotate(header.status(), absl::StrCat("reading '", path, "'"));
  const int64_t buffer_start = 8 + static_cast<int64_t>(n);
  WEFT_RETURN_IF_ERROR(CheckLayout(*header, file_bytes - buffer_start, path));

  SafetensorsFile out;
  out.metadata = std::move(header->metadata);
  for (const auto& [name, e] : header->tensors) {
    if (!Convertible(e.dtype)) {
      return InvalidArgument(absl::StrCat("'", path, "': tensor '", name, "' has dtype ", e.dtype),
                             "F32, BF16 or F16", "convert the file to floating point first");
    }
    std::string bytes(e.end - e.begin, '\0');
    WEFT_RETURN_IF_ERROR(ReadExactly(f.get(), buffer_start + e.begin, bytes, path));
    HostTensor& t = out.tensors[name];
    t.shape = e.shape;
    Decode(bytes, e.dtype, t.values);
  }
  return out;
}

}  // namespace weft::ckpt
