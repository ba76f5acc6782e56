// AllToAllDispatcher: expert parallelism's token exchange. The E experts are
// split into ep consecutive blocks of L = E / ep, block i on group rank i.
//
// Dispatch, per micro-batch:
//   1. counts: every rank sends each peer how many of its rows go to each of
//      that peer's L experts (one all_to_all of ep * L integers);
//   2. rows: one all_to_all_v moves the rows (send split to rank p = rows
//      for p's experts; they are already contiguous in expert order);
//   3. received rows come source-rank-major; a gather regroups them by
//      local expert (source ranks in order within an expert), the layout the
//      grouped GEMM wants.
// Combine is the inverse (un-regroup, all_to_all_v with the splits swapped).
// The backward passes reuse the forward's sizes: CombineBackward moves
// gradients like Dispatch, DispatchBackward like Combine. Each op moves
// every routed row once, so a step moves 4 * tokens * top_k * C elements
// per layer (two forward, two backward), rows a rank keeps included.
//
// Sizes are exchanged before the rows because all_to_all_v needs both
// sides' splits on the host.
#ifndef WEFT_STRATEGIES_EXPERT_ALL_TO_ALL_DISPATCHER_H_
#define WEFT_STRATEGIES_EXPERT_ALL_TO_ALL_DISPATCHER_H_

#include <memory>
#include <vector>

#include "comm/process_group/process_group.h"
#include "core/nn/expert_dispatcher.h"

namespace weft {

class AllToAllDispatcher : public ExpertDispatcher {
 public:
  // `group`: the ep group (group rank i holds experts [i * L, (i + 1) * L)).
  AllToAllDispatcher(std::shared_ptr<comm::ProcessGroup> group, int num_experts);

  absl::StatusOr<Tensor> Dispatch(RunContext& ctx, const Tensor& x,
                                  const std::vector<int64_t>& counts,
                                  std::vector<int64_t>* local_counts) override;
  absl::StatusOr<Tensor> Combine(RunContext& ctx, const Tensor& y) override;
  absl::StatusOr<Tensor> CombineBackward(RunContext& ctx, const Tensor& dy) override;
  absl::StatusOr<Tensor> DispatchBackward(RunContext& ctx, const Tensor& dx) override;

  // Bytes this rank has sent since construction: rows of its own tokens
  // (Dispatch and CombineBackward) and rows its experts computed for any
  // rank (Combine and DispatchBackward), blocks kept on this rank included.
  int64_t own_bytes_sent() const { return own_bytes_; }
  int64_t expert_bytes_sent() const { return expert_bytes_; }

 private:
  // What one micro-batch's exchange needs again (kept in the activation store).
  struct Plan {
    std::vector<int64_t> send_splits;  // rows to each group rank
    std::vector<int64_t> recv_splits;  // rows from each group rank
    Tensor to_local;    // (M') i32: received row of each local-order row
    Tensor to_received; // (M') i32: local-order row of each received row
  };
  absl::StatusOr<Plan> LoadPlan(RunContext& ctx);
  // rows -> peers -> regrouped by `order`.
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Plan& plan, const Tensor& x);
  // regrouped -> back in received order -> peers -> rows.
  absl::StatusOr<Tensor> Inverse(RunContext& ctx, const Plan& plan, const Tensor& y);

  std::shared_ptr<comm::ProcessGroup> group_;
  const int num_experts_;
  const int local_experts_;
  int64_t own_bytes_ = 0;
  int64_t expert_bytes_ = 0;
};

}  // namespace weft

#endif  // WEFT_STRATEGIES_EXPERT_ALL_TO_ALL_DISPATCHER_H_
