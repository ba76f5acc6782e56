#include "checkpoint/loader.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/layout.h"
#include "checkpoint/metadata_file.h"
#include "checkpoint/piece_runs.h"
#include "checkpoint/rank_file.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft::ckpt {
namespace {

PieceGeometry Geometry(const Entry& e, const Piece& p) {
  return {{e.global_shape().begin(), e.global_shape().end()},
          {p.box_offsets().begin(), p.box_offsets().end()},
          {p.box_shape().begin(), p.box_shape().end()},
          p.begin(),
          p.end()};
}

template <typename C>
std::vector<int64_t> Vec(const C& c) {
  return std::vector<int64_t>(c.begin(), c.end());
}

PieceGeometry Geometry(const PieceInfo& info) {
  return {Vec(info.global_shape), info.box_offsets, Vec(info.box_shape), info.begin, info.end};
}

std::string ShapeString(const std::vector<int64_t>& s) { return absl::StrCat("[", absl::StrJoin(s, ","), "]"); }

bool IsOptimizerState(const std::string& name) { return name.find(':') != std::string::npos; }

// Converts n stored elements of `dtype` to f32.
absl::Status Decode(const uint8_t* bytes, DType dtype, int64_t n, float* out) {
  if (dtype == DType::kF32) {
    std::memcpy(out, bytes, static_cast<size_t>(n) * 4);
    return absl::OkStatus();
  }
  if (dtype == DType::kBF16) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      const uint32_t bits = static_cast<uint32_t>(h) << 16;
      std::memcpy(out + i, &bits, 4);
    }
    return absl::OkStatus();
  }
  return InvalidArgument(absl::StrCat("checkpoint dtype ", DTypeName(dtype)), "f32 or bf16");
}

// Copies a full host buffer into a local piece's device tensor.
absl::Status Store(const StatePiece& piece, const std::vector<float>& values, const Stream& stream) {
  WEFT_ASSIGN_OR_RETURN(Tensor host, Tensor::FromFloats(values, {static_cast<int64_t>(values.size())},
                                                         piece.data.dtype()));
  Tensor dst = piece.data;
  WEFT_RETURN_IF_ERROR(dst.CopyFrom(host, stream.native()));
  return stream.Synchronize();
}

absl::StatusOr<DType> EntryDType(const Entry& e) {
  absl::StatusOr<DType> d = ParseDType(e.dtype());
  if (!d.ok() || (*d != DType::kF32 && *d != DType::kBF16)) {
    return InvalidArgument(absl::StrCat("entry ", e.name(), " has dtype \"", e.dtype(), "\""),
                           "f32 or bf16", "metadata.pb is corrupt or from a newer weft");
  }
  return *d;
}

}  // namespace

const Entry* Checkpoint::Find(const std::string& name) const {
  for (const Entry& e : meta.entries()) {
    if (e.name() == name) return &e;
  }
  return nullptr;
}

absl::StatusOr<Checkpoint> OpenCheckpoint(const std::string& step_dir) {
  const std::string path = absl::StrCat(step_dir, "/", kMetadataFile);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFound(absl::StrCat("no checkpoint metadata at ", path),
                    "a step_<N>/ directory written by weft",
                    "point --resume at a step directory, or use --resume=latest");
  }
  std::stringstream bytes;
  bytes << in.rdbuf();
  Checkpoint c;
  c.dir = step_dir;
  WEFT_ASSIGN_OR_RETURN(c.meta, ParseMetadata(path, bytes.str()));
  if (c.meta.version() != 1) {
    return InvalidArgument(absl::StrCat(path, " has format version ", c.meta.version()),
                           "version 1", "read it with the weft that wrote it");
  }
  if (c.meta.chunk_bytes() <= 0) {
    return InvalidArgument(absl::StrCat(path, ": chunk_bytes ", c.meta.chunk_bytes()), "> 0");
  }
  for (const Entry& e : c.meta.entries()) {
    WEFT_RETURN_IF_ERROR(EntryDType(e).status());
    const int nd = e.global_shape_size();
    for (const Piece& p : e.pieces()) {
      int64_t box = 1;
      bool ok = p.box_offsets_size() == nd && p.box_shape_size() == nd;
      for (int d = 0; ok && d < nd; ++d) {
        box *= p.box_shape(d);
        ok = p.box_offsets(d) >= 0 && p.box_offsets(d) + p.box_shape(d) <= e.global_shape(d);
      }
      if (!ok || p.begin() < 0 || p.end() < p.begin() || p.end() > box) {
        return InvalidArgument(absl::StrCat("entry ", e.name(), ": a piece in ", p.file(),
                                            " lies outside the tensor"),
                               "pieces inside their entry's global shape",
                               "metadata.pb is corrupt");
      }
    }
  }
  return c;
}

absl::Status CheckCompatible(const Checkpoint& ckpt, const std::vector<StatePiece>& local,
                             const LoadOptions& options) {
  std::map<std::string, std::vector<int64_t>> here;
  for (const StatePiece& p : local) {
    if (options.weights_only && IsOptimizerState(p.info.name)) continue;
    here[p.info.name] = Vec(p.info.global_shape);
  }
  std::vector<std::string> missing, extra, shapes;
  std::set<std::string> saved;
  for (const Entry& e : ckpt.meta.entries()) {
    if (options.weights_only && IsOptimizerState(e.name())) continue;
    saved.insert(e.name());
    auto it = here.find(e.name());
    if (it == here.end()) {
      if (options.job_entries != nullptr && !options.job_entries->count(e.name())) {
        extra.push_back(e.name());
      }
      continue;
    }
    std::vector<int64_t> s(e.global_shape().begin(), e.global_shape().end());
    if (!SameRowMajorLayout(s, it->second)) {
      shapes.push_back(absl::StrCat(e.name(), " ", ShapeString(s), " in the checkpoint, ",
                                    ShapeString(it->second), " here"));
    }
  }
  for (const auto& [name, shape] : here) {
    if (!saved.count(name)) missing.push_back(name);
  }
  if (missing.empty() && extra.empty() && shapes.empty()) return absl::OkStatus();
  auto list = [](const std::vector<std::string>& v) {
    const size_t shown = std::min<size_t>(v.size(), 12);
    std::string s = absl::StrJoin(v.begin(), v.begin() + shown, ", ");
    if (shown < v.size()) absl::StrAppend(&s, ", ... (", v.size() - shown, " more)");
    return s;
  };
  std::sort(extra.begin(), extra.end());
  std::vector<std::string> parts;
  if (!missing.empty()) parts.push_back(absl::StrCat("not in the checkpoint: ", list(missing)));
  if (!extra.empty()) parts.push_back(absl::StrCat("only in the checkpoint: ", list(extra)));
  if (!shapes.empty()) parts.push_back(absl::StrCat("shapes differ: ", list(shapes)));
  // How to keep the weights under another optimizer: the hint said "a
  // weights-only load", which no flag asks for.
  const std::string fresh_start = absl::StrCat(
      "start from its weights alone: bazel run //tools:ckpt -- export ", ckpt.dir,
      " --format=safetensors --out=FILE, then --init_from=FILE (the optimizer and the step "
      "start over)");
  // Only optimizer entries differ: another optimizer (adamw keeps two
  // moments, sgd one), not another model.
  const auto is_state = [](const std::string& n) { return IsOptimizerState(n); };
  if (shapes.empty() && std::all_of(missing.begin(), missing.end(), is_state) &&
      std::all_of(extra.begin(), extra.end(), is_state)) {
    return FailedPrecondition(
        absl::StrCat("checkpoint ", ckpt.dir, " holds the state of optimizer '",
                     ckpt.meta.optimizer(), "', not this run's: ", absl::StrJoin(parts, "; ")),
        absl::StrCat("the optimizer it was trained with (--optim.name=", ckpt.meta.optimizer(),
                     ")"),
        absl::StrCat("resume with it; to change optimizers of a GPT, ", fresh_start));
  }
  const std::string what = absl::StrCat("checkpoint ", ckpt.dir, " does not match this model: ",
                                        absl::StrJoin(parts, "; "));
  return FailedPrecondition(
      what, "the same model config and optimizer as the run that saved it",
      absl::StrCat("the checkpoint's job config is in its metadata (bazel run //tools:ckpt -- "
                   "inspect ",
                   ckpt.dir, "); to change the optimizer of a GPT, ", fresh_start));
}

absl::Status LoadState(const Checkpoint& ckpt, const std::vector<StatePiece>& local,
                       const Stream& stream, const LoadOptions& options, LoadStats* stats) {
  WEFT_RETURN_IF_ERROR(CheckCompatible(ckpt, local, options));
  PieceReader reader(ckpt.dir, ckpt.meta.chunk_bytes());
  std::vector<float> staging;
  for (const StatePiece& lp : local) {
    if (options.weights_only && IsOptimizerState(lp.info.name)) continue;
    const Entry& e = *ckpt.Find(lp.info.name);
    WEFT_ASSIGN_OR_RETURN(DType dtype, EntryDType(e));
    const int64_t es = static_cast<int64_t>(DTypeSize(dtype));
    const int64_t n = lp.info.end - lp.info.begin;
    // f32 pieces in host memory are filled in place; others go through a
    // host buffer and one copy.
    const bool direct = lp.data.device().is_cpu() && lp.data.dtype() == DType::kF32 &&
                        lp.data.is_contiguous();
    if (!direct) staging.assign(static_cast<size_t>(n), 0.f);
    float* dst = direct ? lp.data.data<float>() : staging.data();
    int64_t covered = 0;
    const std::vector<IndexRun> mine = GlobalRuns(Geometry(lp.info));
    for (const Piece& p : e.pieces()) {
      if (p.replica() != 0) continue;
      if (p.length() != (p.end() - p.begin()) * es) {
        return InvalidArgument(absl::StrCat("entry ", e.name(), ": a piece in ", p.file(), " of ",
                                            p.length(), " bytes for ", p.end() - p.begin(),
                                            " elements"),
                               absl::StrCat(es, " bytes per element"), "metadata.pb is corrupt");
      }
      const std::vector<Overlap> overlaps = Intersect(mine, GlobalRuns(Geometry(e, p)));
      if (overlaps.empty()) continue;
      // One read of the span the overlaps touch: each chunk is read and
      // verified once however finely the layouts interleave.
      int64_t lo = overlaps.front().b_local, hi = lo;
      for (const Overlap& o : overlaps) {
        lo = std::min(lo, o.b_local);
        hi = std::max(hi, o.b_local + o.length);
      }
      WEFT_ASSIGN_OR_RETURN(const uint8_t* bytes, reader.View(e.name(), p, lo * es, hi * es));
      for (const Overlap& o : overlaps) {
        WEFT_RETURN_IF_ERROR(Decode(bytes + (o.b_local - lo) * es, dtype, o.length, dst + o.a_local));
        covered += o.length;
      }
    }
    if (covered != n) {
      return absl::DataLossError(absl::StrCat(
          "entry ", e.name(), ": the checkpoint's pieces cover ", covered, " of the ", n,
          " elements this rank holds. Hint: metadata.pb is inconsistent; verify it with "
          "bazel run //tools:ckpt -- verify ",
          ckpt.dir));
    }
    if (!direct) WEFT_RETURN_IF_ERROR(Store(lp, staging, stream));
    if (stats != nullptr) stats->elements_loaded += n;
  }
  if (stats != nullptr) stats->bytes_read += reader.bytes_read();
  return absl::OkStatus();
}

absl::Status LoadFromFull(const std::map<std::string, HostTensor>& full,
                          const std::vector<StatePiece>& local, const Stream& stream,
                          std::vector<std::string>* skipped) {
  for (const StatePiece& lp : local) {
    auto it = full.find(lp.info.name);
    if (it == full.end()) {
      if (skipped != nullptr) skipped->push_back(lp.info.name);
      continue;
    }
    if (!SameRowMajorLayout(it->second.shape, Vec(lp.info.global_shape))) {
      return FailedPrecondition(absl::StrCat(lp.info.name, " has shape ", ShapeString(it->second.shape),
                                             " in the file"),
                                absl::StrCat(ShapeString(Vec(lp.info.global_shape)), " in this model"),
                                "build the model with the file's config");
    }
    std::vector<float> values(static_cast<size_t>(lp.info.end - lp.info.begin));
    for (const IndexRun& r : GlobalRuns(Geometry(lp.info))) {
      std::copy_n(it->second.values.begin() + r.global, r.length, values.begin() + r.local);
    }
    WEFT_RETURN_IF_ERROR(Store(lp, values, stream));
  }
  return absl::OkStatus();
}

absl::Status VerifyChecksums(const Checkpoint& ckpt, int64_t* bytes_checked) {
  PieceReader reader(ckpt.dir, ckpt.meta.chunk_bytes());
  const int64_t step = std::max<int64_t>(ckpt.meta.chunk_bytes(), 64 << 20) /
                       ckpt.meta.chunk_bytes() * ckpt.meta.chunk_bytes();
  for (const Entry& e : ckpt.meta.entries()) {
    for (const Piece& p : e.pieces()) {
      for (int64_t from = 0; from < p.length(); from += step) {
        const int64_t to = std::min(p.length(), from + step);
        WEFT_RETURN_IF_ERROR(reader.View(e.name(), p, from, to).status());
      }
    }
  }
  if (bytes_checked != nullptr) *bytes_checked = reader.bytes_read();
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, HostTensor>> ReadFullTensors(
    const Checkpoint& ckpt, const std::function<bool(const std::string&)>& want) {
  std::map<std::string, HostTensor> out;
  PieceReader reader(ckpt.dir, ckpt.meta.chunk_bytes());
  for (const Entry& e : ckpt.meta.entries()) {
    if (want && !want(e.name())) continue;
    WEFT_ASSIGN_OR_RETURN(DType dtype, EntryDType(e));
    const int64_t es = static_cast<int64_t>(DTypeSize(dtype));
    HostTensor& t = out[e.name()];
    t.shape.assign(e.global_shape().begin(), e.global_shape().end());
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    t.values.assign(static_cast<size_t>(n), 0.f);
    int64_t covered = 0;
    for (const Piece& p : e.pieces()) {
      if (p.replica() != 0 || p.end() == p.begin()) continue;
      WEFT_ASSIGN_OR_RETURN(const uint8_t* bytes, reader.View(e.name(), p, 0, p.length()));
      for (const IndexRun& r : GlobalRuns(Geometry(e, p))) {
        WEFT_RETURN_IF_ERROR(Decode(bytes + r.local * es, dtype, r.length, t.values.data() + r.global));
        covered += r.length;
      }
    }
    if (covered != n) {
      return absl::DataLossError(absl::StrCat("entry ", e.name(), ": pieces cover ", covered, " of ",
                                              n, " elements"));
    }
  }
  return out;
}

}  // namespace weft::ckpt
