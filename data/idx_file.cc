#include "data/idx_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "data/file_util.h"

namespace weft::data {
namespace {

constexpr uint8_t kTypeUnsignedByte = 0x08;
constexpr int kMaxDims = 8;
constexpr char kHint[] =
    "Fashion-MNIST comes from Debian's dataset-fashion-mnist package "
    "(/usr/share/datasets/fashion-mnist/*-ubyte.gz)";

// gzread reads plain files too, so one path serves both encodings.
absl::StatusOr<std::string> ReadMaybeGzip(const std::string& path) {
  if (!FileExists(path)) {
    return NotFound(absl::StrCat("IDX file '", path, "' does not exist"), "an existing file",
                    kHint);
  }
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    return InvalidArgument(absl::StrCat("cannot open '", path, "': ", std::strerror(errno)),
                           "a readable file");
  }
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  int err = Z_OK;
  const char* msg = gzerror(f, &err);
  const std::string message = msg != nullptr ? msg : "";
  gzclose(f);
  // Z_BUF_ERROR here means the input ended mid-stream (a cut-off .gz).
  if (n < 0 || err != Z_OK) {
    return InvalidArgument(absl::StrCat("corrupt gzip stream in '", path, "': ", message),
                           "a complete .gz file", "the download was probably cut short");
  }
  return out;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(std::string bytes, ReadMaybeGzip(path));
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < 4 || p[0] != 0 || p[1] != 0) {
    return InvalidArgument(absl::StrCat("'", path, "' is not an IDX file (bad magic)"),
                           "bytes 00 00 <type> <ndims>", kHint);
  }
  if (p[2] != kTypeUnsignedByte) {
    return InvalidArgument(
        absl::StrCat("IDX element type 0x", absl::Hex(p[2]), " in '", path, "'"),
        "0x08 (unsigned byte), the type MNIST-style datasets use");
  }
  const int ndims = p[3];
  if (ndims < 1 || ndims > kMaxDims) {
    return InvalidArgument(absl::StrCat(ndims, " dimensions in IDX file '", path, "'"),
                           absl::StrCat("1 to ", kMaxDims));
  }
  const size_t header = 4 + 4 * static_cast<size_t>(ndims);
  if (bytes.size() < header) {
    return InvalidArgument(absl::StrCat("truncated IDX header in '", path, "'"),
                           absl::StrCat(header, " header bytes"), kHint);
  }
  IdxArray out;
  size_t count = 1;
  for (int d = 0; d < ndims; ++d) {
    const uint32_t n = BigEndian32(p + 4 + 4 * d);
    if (n == 0 || n > (1u << 30)) {
      return InvalidArgument(absl::StrCat("IDX dimension ", d, " of '", path, "' is ", n),
                             "a size in [1, 2^30]");
    }
    out.dims.push_back(n);
    // Dimensions whose product wraps around size_t (16 x 2^30 x 2^30 is 2^64,
    // i.e. 0) would match an empty file and describe images of 2^60 pixels.
    if (__builtin_mul_overflow(count, size_t{n}, &count) || count > bytes.size()) {
      return InvalidArgument(
          absl::StrCat("truncated IDX file '", path, "': its dimensions ",
                       absl::StrJoin(out.dims, " x "), (d + 1 < ndims ? " x ..." : ""),
                       " need more bytes than the file's ", bytes.size()),
          "dimensions whose product is the number of data bytes", kHint);
    }
  }
  const size_t have = bytes.size() - header;
  if (have != count) {
    return InvalidArgument(
        absl::StrCat(have < count ? "truncated" : "trailing bytes in", " IDX file '", path,
                     "': ", have, " data bytes"),
        absl::StrCat(count, " bytes for the dimensions in its header"), kHint);
  }
  out.values.assign(p + header, p + bytes.size());
  return out;
}

absl::Status WriteIdxFile(const std::string& path, absl::Span<const int64_t> dims,
                          absl::Span<const uint8_t> values, bool gzip) {
  std::string bytes = {0, 0, static_cast<char>(kTypeUnsignedByte), static_cast<char>(dims.size())};
  size_t count = 1;
  for (int64_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>(d >> shift));
    count *= static_cast<size_t>(d);
  }
  if (count != values.size()) {
    return InvalidArgument(absl::StrCat(values.size(), " values for IDX dims"),
                           absl::StrCat(count, " values"));
  }
  bytes.append(reinterpret_cast<const char*>(values.data()), values.size());
  if (!gzip) return WriteFileAtomically(path, bytes);
  gzFile f = gzopen(path.c_str(), "wb");
  if (f == nullptr) {
    return InvalidArgument(absl::StrCat("cannot create '", path, "'"), "a writable path");
  }
  const int wrote = gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  if (gzclose(f) != Z_OK || wrote != static_cast<int>(bytes.size())) {
    return Internal(absl::StrCat("short gzip write to '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace weft::data
