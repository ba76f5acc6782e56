#include "core/nn/dropout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

// Sharded regions draw from their own stream.
constexpr uint64_t kShardedStreamKey = 0x5348415244454421ull;
// The T of (B, T, ...): where context parallelism splits the sequence.
constexpr int kSequenceDim = 1;

uint64_t Dropout::Seed(const RunContext& ctx) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the module path
  for (unsigned char c : name()) {
    h ^= c;
    h *= 1099511628211ull;
  }
  const uint64_t step = ctx.dropout_seed_in_memory.defined() ? 0 : ctx.dropout_seed;
  return step ^ h ^ (stream_ == Stream::kSharded ? kShardedStreamKey : 0);
}

void Dropout::SetShard(Box box, Shape global) {
  stream_ = Stream::kSharded;
  shard_.emplace(std::move(box), std::move(global));
}

void Dropout::SetBlockAlong(int dim, int index, int count) {
  block_ = Block{dim, index, count};
}

void ForEachContiguousRun(const Box& box, const Shape& global,
                          const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  const int nd = static_cast<int>(global.size());
  const int64_t total = NumElements(box.shape);
  if (total == 0) return;
  // Trailing dimensions the box covers whole merge into one run, plus the
  // first partial one from the right.
  int split = nd - 1;
  int64_t run = 1;
  while (split >= 0) {
    run *= box.shape[split];
    if (box.shape[split] != global[split]) break;
    --split;
  }
  std::vector<int64_t> idx(nd, 0);
  for (int64_t local = 0; local < total; local += run) {
    int64_t g = 0;
    for (int d = 0; d < nd; ++d) g = g * global[d] + box.offsets[d] + idx[d];
    fn(local, g, run);
    for (int d = split - 1; d >= 0; --d) {  // the next run's start
      if (++idx[d] < box.shape[d]) break;
      idx[d] = 0;
    }
  }
}

absl::StatusOr<SequenceRows> MapSequenceRows(int64_t rows, int index, int count,
                                             const std::optional<TokenChunks>& chunks) {
  if (rows < 0 || count < 1 || index < 0 || index >= count) {
    return InvalidArgument(absl::StrCat(rows, " rows as block ", index, " of ", count),
                           "rows >= 0 and 0 <= index < count");
  }
  // Positions among the rank's tokens first, then where those sit globally.
  const int64_t rank_rows = rows * count;
  int64_t pos = index * rows;
  SequenceRows out;
  if (!chunks.has_value()) {
    out.runs.push_back({0, pos, rows});
    out.global_rows = rank_rows;
    return out;
  }
  const TokenChunks& c = *chunks;
  if (c.chunk_len <= 0 || c.count < 1 || c.count > TokenChunks::kMaxChunks ||
      c.size() != rank_rows) {
    return InvalidArgument(
        absl::StrCat(rows, " rows along the sequence",
                     count > 1 ? absl::StrCat(" (block ", index, " of ", count, ")") : "",
                     " on a rank holding ", c.count, " chunks of ", c.chunk_len, " tokens"),
        "rows x blocks = the rank's tokens",
        "dropout runs on (B, T_local, ...) activations of the rank's chunks");
  }
  for (int64_t local = 0, left = rows; left > 0;) {
    const int64_t chunk = pos / c.chunk_len, within = pos % c.chunk_len;
    const int64_t n = std::min(left, c.chunk_len - within);
    const int64_t global = c.offsets[chunk] + within;
    if (!out.runs.empty() && out.runs.back().global + out.runs.back().length == global) {
      out.runs.back().length += n;  // adjacent chunks: one run
    } else {
      out.runs.push_back({local, global, n});
    }
    local += n;
    pos += n;
    left -= n;
  }
  out.global_rows = c.seq_len > 0 ? c.seq_len : c.size();
  return out;
}

void ForEachSequenceRun(const Shape& shape, int dim, const SequenceRows& rows,
                        const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= shape[d];
  for (int d = dim + 1; d < static_cast<int>(shape.size()); ++d) inner *= shape[d];
  const int64_t local_rows = shape[dim];
  for (int64_t o = 0; o < outer; ++o) {
    for (const SequenceRows::Run& r : rows.runs) {
      fn((o * local_rows + r.local) * inner, (o * rows.global_rows + r.global) * inner,
         r.length * inner);
    }
  }
}

absl::Status Dropout::Apply(RunContext& ctx, Tensor& out, const Tensor& in, bool backward) const {
  if (in.ndim() < 1 || in.dim(0) < 1) {
    return InvalidArgument(absl::StrCat("dropout '", name(), "' input ", ShapeString(in.shape())),
                           "(B, ...) with samples along the first dimension");
  }
  // Every path below places the input in a tensor of this call's B samples
  // (the whole tensor, or the sequence or box it is a piece of): its
  // elements per sample and this micro-batch's samples key the masks.
  DropoutKey key{.seed = Seed(ctx),
                 .first_sample = ctx.samples.first,
                 .sample_stride = ctx.samples.stride};
  if (ctx.dropout_seed_in_memory.defined()) {
    key.seed_in_memory = reinterpret_cast<const uint64_t*>(ctx.dropout_seed_in_memory.raw_data());
  }
  auto launch = [&](Tensor& o, const Tensor& i, uint64_t offset) {
    DropoutKey k = key;
    k.offset = offset;
    return backward ? ctx.ops->DropoutBackward(ctx.kernel(), o, i, p_, k)
                    : ctx.ops->DropoutForward(ctx.kernel(), o, i, p_, k);
  };
  Tensor flat_out = out.View({out.numel()});
  const Tensor flat_in = in.View({in.numel()});
  absl::Status status;
  const auto launch_run = [&](int64_t local, int64_t g, int64_t n) {
    if (!status.ok()) return;
    Tensor o = flat_out.Slice(0, local, local + n);
    status = launch(o, flat_in.Slice(0, local, local + n), static_cast<uint64_t>(g));
  };
  // A rank holding chunks of the sequence (context parallelism).
  const std::optional<TokenChunks>& chunks = ctx.sequence;
  const bool chunked = chunks.has_value() &&
                       !(chunks->IsIdentity() && (chunks->seq_len == 0 ||
                                                  chunks->seq_len == chunks->size()));
  if (shard_) {
    if (block_ || chunked) {
      return FailedPrecondition(
          absl::StrCat("dropout '", name(), "' holds a sharded box and a piece of the sequence"),
          "either a box (SetShard) or sequence pieces (SetBlockAlong, RunContext::sequence)");
    }
    const auto& [box, global] = *shard_;
    if (in.shape() != box.shape) {
      return InvalidArgument(absl::StrCat("dropout '", name(), "' input ", ShapeString(in.shape())),
                             "the sharded box " + ShapeString(box.shape));
    }
    if (global.empty() || global[0] != in.dim(0) || box.offsets[0] != 0) {
      return InvalidArgument(
          absl::StrCat("dropout '", name(), "' box of ", ShapeString(box.shape), " at dimension-0 ",
                       "offset ", box.offsets.empty() ? 0 : box.offsets[0], " in ",
                       ShapeString(global)),
          "a box holding all B samples of the global tensor",
          "shard dropout regions along the features or the sequence, not the batch");
    }
    key.sample_size = static_cast<uint64_t>(NumElements(global) / global[0]);
    ForEachContiguousRun(box, global, launch_run);
    return status;
  }
  if (!block_ && !chunked) {
    key.sample_size = static_cast<uint64_t>(in.numel() / in.dim(0));
    return launch(out, in, 0);
  }
  const int dim = block_ ? block_->dim : kSequenceDim;
  // Dimension 0 holds the samples, which the masks are keyed by.
  if (dim < 1 || dim >= in.ndim() || (chunked && dim != kSequenceDim)) {
    return InvalidArgument(absl::StrCat("dropout '", name(), "' input ", ShapeString(in.shape()),
                                        " split along dimension ", dim,
                                        chunked ? " on a rank holding chunks of the sequence" : ""),
                           chunked ? "a split along the sequence (dimension 1) of (B, T, ...)"
                                   : "an input with that dimension");
  }
  absl::StatusOr<SequenceRows> rows =
      MapSequenceRows(in.dim(dim), block_ ? block_->index : 0, block_ ? block_->count : 1,
                      chunked ? chunks : std::nullopt);
  if (!rows.ok()) return Annotate(rows.status(), absl::StrCat("dropout '", name(), "'"));
  // The tensor the rows belong to: the input with all `global_rows` rows.
  key.sample_size =
      static_cast<uint64_t>(in.numel() / in.dim(dim) * rows->global_rows / in.dim(0));
  ForEachSequenceRun(in.shape(), dim, *rows, launch_run);
  return status;
}

absl::StatusOr<Tensor> Dropout::Forward(RunContext& ctx, const Tensor& x) {
  // Nothing is saved: the mask is recomputed from the seed in backward.
  if (!ctx.training || p_ == 0.f) return x;
  WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.Empty(x.shape(), x.dtype()));
  WEFT_RETURN_IF_ERROR(Apply(ctx, out, x, /*backward=*/false));
  return out;
}

absl::StatusOr<Tensor> Dropout::Backward(RunContext& ctx, const Tensor& dy) {
  if (p_ == 0.f) return dy;
  WEFT_ASSIGN_OR_RETURN(Tensor dx, ctx.Empty(dy.shape(), dy.dtype()));
  WEFT_RETURN_IF_ERROR(Apply(ctx, dx, dy, /*backward=*/true));
  return dx;
}

}  // namespace weft
