#include "strategies/tp/region_ops.h"

#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft::tp {
namespace {

constexpr int kSequenceDim = 1;  // of (B, T, C)

// Sequence shards of context-parallel chunks: the rank holds seq_len / cp
// tokens, so it is seq_len / cp that must split tp ways.
absl::Status ChunksNotDivisible(const TpComm& tp, const Tensor& x, const TokenChunks& chunks) {
  const int cp = static_cast<int>(chunks.seq_len / chunks.size());
  return Annotate(CheckSequenceShards(chunks.seq_len, cp, tp.size()),
                  absl::StrCat("a rank holding ", x.dim(1), " tokens (its context-parallel "
                               "chunks, 1/", cp, " of seq_len), input ", ShapeString(x.shape())));
}

absl::Status CheckDim(const TpComm& tp, const RunContext& ctx, const Tensor& x, int dim,
                      bool divisible) {
  if (dim < 0 || dim >= x.ndim()) {
    return InvalidArgument(absl::StrCat("tp: dimension ", dim, " of ", ShapeString(x.shape())),
                           "an existing dimension");
  }
  if (divisible && x.dim(dim) % tp.size() != 0) {
    const std::optional<TokenChunks>& chunks = ctx.sequence;
    if (dim == kSequenceDim && chunks.has_value() && chunks->size() == x.dim(dim) &&
        chunks->seq_len > chunks->size()) {
      return ChunksNotDivisible(tp, x, *chunks);
    }
    return InvalidArgument(
        absl::StrCat("tp: dimension ", dim, " of ", ShapeString(x.shape()), " split ", tp.size(),
                     " ways"),
        absl::StrCat("a size divisible by tp=", tp.size()),
        dim == kSequenceDim ? "with sequence parallelism seq_len must be a multiple of tp"
                            : "pick sizes that divide by tp");
  }
  return absl::OkStatus();
}

// Moves axis `from` of a contiguous tensor to position `to`, as a copy.
absl::StatusOr<Tensor> MoveAxis(const Tensor& x, int from, int to, NativeStream stream) {
  if (from == to) return x;
  std::vector<int> order(x.ndim());
  std::iota(order.begin(), order.end(), 0);
  order.erase(order.begin() + from);
  order.insert(order.begin() + to, from);
  return x.Permute(order).Contiguous(stream);
}

}  // namespace

absl::Status CheckSequenceShards(int64_t seq_len, int cp, int tp) {
  const int64_t shards = int64_t{cp} * tp;
  if (seq_len > 0 && seq_len % shards == 0) return absl::OkStatus();
  // Lengths that work: multiples of tp, and with cp also of 2 x cp (zigzag).
  const int64_t step = cp > 1 ? std::lcm(shards, int64_t{2} * cp) : shards;
  const int64_t below = seq_len / step * step, above = below + step;
  const std::string pick =
      absl::StrCat("use --seq_len=", below > 0 ? absl::StrCat(below, " or ") : "", above);
  if (cp <= 1) {
    return InvalidArgument(
        absl::StrCat("sequence parallelism over tp=", tp, " with seq_len=", seq_len),
        absl::StrCat("a seq_len divisible by tp=", tp,
                     " (with sequence parallelism seq_len must be a multiple of tp)"),
        absl::StrCat(pick, ", or lower --tp"));
  }
  return InvalidArgument(
      absl::StrCat("sequence parallelism over tp=", tp, " with --cp=", cp, " and seq_len=",
                   seq_len, " (each cp rank holds ", seq_len / cp, " tokens)"),
      absl::StrCat("seq_len divisible by cp x tp = ", shards,
                   ", so that each cp rank's tokens split into tp sequence shards"),
      absl::StrCat(pick, " (divisible by both ", shards, " and 2 x cp = ", 2 * cp,
                   "), or lower --tp"));
}

absl::StatusOr<Tensor> AllReduce(const TpComm& tp, const Tensor& x) {
  WEFT_RETURN_IF_ERROR(Annotate(
      tp.group->AllReduce(x, {.op = comm::ReduceOp::kSum, .stream = tp.stream})->Wait(),
      "tp all-reduce"));
  return x;
}

absl::StatusOr<Tensor> AllGatherAlong(const TpComm& tp, RunContext& ctx, const Tensor& x,
                                      int dim) {
  WEFT_RETURN_IF_ERROR(CheckDim(tp, ctx, x, dim, /*divisible=*/false));
  const int n = tp.size();
  Tensor in = x;
  if (!in.is_contiguous()) {
    WEFT_ASSIGN_OR_RETURN(in, x.Contiguous(ctx.stream));
  }
  Shape blocks = x.shape();
  blocks.insert(blocks.begin(), n);  // (n, ...x)
  WEFT_ASSIGN_OR_RETURN(Tensor gathered, ctx.Empty(blocks, x.dtype()));
  WEFT_RETURN_IF_ERROR(Annotate(
      tp.group->AllGather(in, gathered, {.stream = tp.stream})->Wait(), "tp all-gather"));
  // (n, d0, .., d_dim, ..) -> (d0, .., n, d_dim, ..) -> merge n into d_dim.
  WEFT_ASSIGN_OR_RETURN(Tensor moved, MoveAxis(gathered, 0, dim, ctx.stream));
  Shape out = x.shape();
  out[dim] *= n;
  return moved.View(out);
}

absl::StatusOr<Tensor> ReduceScatterAlong(const TpComm& tp, RunContext& ctx, const Tensor& x,
                                          int dim) {
  WEFT_RETURN_IF_ERROR(CheckDim(tp, ctx, x, dim, /*divisible=*/true));
  const int n = tp.size();
  Tensor in = x;
  if (!in.is_contiguous()) {
    WEFT_ASSIGN_OR_RETURN(in, x.Contiguous(ctx.stream));
  }
  Shape split = x.shape();  // (.., n, d_dim / n, ..)
  split[dim] /= n;
  split.insert(split.begin() + dim, n);
  WEFT_ASSIGN_OR_RETURN(Tensor blocks, MoveAxis(in.View(split), dim, 0, ctx.stream));
  Shape out = x.shape();
  out[dim] /= n;
  WEFT_ASSIGN_OR_RETURN(Tensor y, ctx.Empty(out, x.dtype()));
  WEFT_RETURN_IF_ERROR(Annotate(
      tp.group->ReduceScatter(blocks, y, {.op = comm::ReduceOp::kSum, .stream = tp.stream})
          ->Wait(),
      "tp reduce-scatter"));
  return y;
}

absl::StatusOr<Tensor> EnterColumnRegion(const TpComm& tp, RunContext& ctx, const Tensor& x) {
  if (tp.sequence_parallel) return AllGatherAlong(tp, ctx, x, kSequenceDim);
  return CopyToForward(tp, x);
}

absl::StatusOr<Tensor> EnterColumnRegionBackward(const TpComm& tp, RunContext& ctx,
                                                 const Tensor& dx_partial) {
  if (tp.sequence_parallel) return ReduceScatterAlong(tp, ctx, dx_partial, kSequenceDim);
  return CopyToBackward(tp, dx_partial);
}

absl::StatusOr<Tensor> LeaveRowRegion(const TpComm& tp, RunContext& ctx, const Tensor& y_partial) {
  if (tp.sequence_parallel) return ReduceScatterAlong(tp, ctx, y_partial, kSequenceDim);
  return ReduceFromForward(tp, y_partial);
}

absl::StatusOr<Tensor> LeaveRowRegionBackward(const TpComm& tp, RunContext& ctx,
                                              const Tensor& dy) {
  if (tp.sequence_parallel) return AllGatherAlong(tp, ctx, dy, kSequenceDim);
  return ReduceFromBackward(tp, dy);
}

}  // namespace weft::tp
