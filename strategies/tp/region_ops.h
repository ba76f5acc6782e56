// The tensor-parallel region ops, forward and backward (Megatron's names):
//
//   op            forward                       backward
//   copy_to       identity                      all-reduce
//   reduce_from   all-reduce                    identity
//
// (Megatron's scatter_to / gather_from along the last dimension have no
// user: column-parallel outputs stay split until a row-parallel layer, and
// the vocab-parallel loss reduces its statistics instead of gathering
// logits.) Sequence parallelism swaps the
// all-reduce around a region for an all-gather before it and a
// reduce-scatter after it, along the sequence dimension (1 of (B, T, C)):
//   gather_seq    all-gather along T            reduce-scatter along T
//   scatter_seq   reduce-scatter along T        all-gather along T
// Each is collective over the tp group: every rank calls it in the same
// order. Results are new tensors; all-reduces work in place.
#ifndef WEFT_STRATEGIES_TP_REGION_OPS_H_
#define WEFT_STRATEGIES_TP_REGION_OPS_H_

#include "absl/status/statusor.h"
#include "core/nn/run_context.h"
#include "strategies/tp/tp_comm.h"

namespace weft::tp {

// seq_len tokens split over cp ranks (1: no context parallelism) and each
// rank's tokens into tp sequence shards: OK when seq_len divides by cp x tp;
// the error names lengths that work.
absl::Status CheckSequenceShards(int64_t seq_len, int cp, int tp);

// x summed over the tp ranks, in place; returns x.
absl::StatusOr<Tensor> AllReduce(const TpComm& tp, const Tensor& x);
// Every rank's x concatenated along `dim` in rank order.
absl::StatusOr<Tensor> AllGatherAlong(const TpComm& tp, RunContext& ctx, const Tensor& x, int dim);
// The sum over ranks of x, block `rank` of `size` along `dim`.
absl::StatusOr<Tensor> ReduceScatterAlong(const TpComm& tp, RunContext& ctx, const Tensor& x,
                                          int dim);

inline absl::StatusOr<Tensor> CopyToForward(const TpComm&, const Tensor& x) { return x; }
inline absl::StatusOr<Tensor> CopyToBackward(const TpComm& tp, const Tensor& dy) {
  return AllReduce(tp, dy);
}
inline absl::StatusOr<Tensor> ReduceFromForward(const TpComm& tp, const Tensor& x) {
  return AllReduce(tp, x);
}
inline absl::StatusOr<Tensor> ReduceFromBackward(const TpComm&, const Tensor& dy) { return dy; }

// Entering a column-parallel region: the whole input on every rank.
// Leaving a row-parallel region: partial sums to the full (tp) or the
// sequence shard (sp). And their backwards.
absl::StatusOr<Tensor> EnterColumnRegion(const TpComm& tp, RunContext& ctx, const Tensor& x);
absl::StatusOr<Tensor> EnterColumnRegionBackward(const TpComm& tp, RunContext& ctx,
                                                 const Tensor& dx_partial);
absl::StatusOr<Tensor> LeaveRowRegion(const TpComm& tp, RunContext& ctx, const Tensor& y_partial);
absl::StatusOr<Tensor> LeaveRowRegionBackward(const TpComm& tp, RunContext& ctx,
                                              const Tensor& dy);

}  // namespace weft::tp

#endif  // WEFT_STRATEGIES_TP_REGION_OPS_H_
