// AllToAllDispatcher: expert parallelism's token exchange. The E experts are
// split into ep consecutive blocks of L = E / ep, block i on group rank i.
//
// Forward, per micro-batch:
//   1. counts: every rank sends each peer how many of its rows go to each of
//      that peer's L experts (one all_to_all of ep * L integers);
//   2. rows: one all_to_all_v moves the rows (send split to rank p = rows
//      for p's experts; they are already contiguous in expert order). They
//      arrive source-rank-major, each source's rows grouped by local expert:
//      one run per source rank, the layout the experts take as is
//      (ExpertMlps runs);
//   3. the experts run; with overlap, the run of this rank's own rows is
//      computed from the send buffer while the all_to_all_v is in flight,
//      and the other runs after it completes;
//   4. combine: the outputs go back with the splits swapped.
// Backward mirrors it: the output gradients travel like the rows (and the
// own run's backward overlaps that exchange), the input gradients like the
// outputs. Each exchange moves every routed row once, so a step moves
// 4 * tokens * top_k * C elements per layer (two forward, two backward),
// rows a rank keeps included.
//
// Sizes are exchanged before the rows because all_to_all_v needs both
// sides' splits on the host. The combine exchanges have nothing left to
// overlap with: every output row they carry is needed first.
#ifndef WEFT_STRATEGIES_EXPERT_ALL_TO_ALL_DISPATCHER_H_
#define WEFT_STRATEGIES_EXPERT_ALL_TO_ALL_DISPATCHER_H_

#include <functional>
#include <memory>
#include <vector>

#include "comm/process_group/process_group.h"
#include "core/nn/expert_dispatcher.h"

namespace weft {

class AllToAllDispatcher : public ExpertDispatcher {
 public:
  // `group`: the ep group (group rank i holds experts [i * L, (i + 1) * L)).
  // `overlap`: compute the own run while the rows are exchanged.
  AllToAllDispatcher(std::shared_ptr<comm::ProcessGroup> group, int num_experts, bool overlap);

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x,
                                 const std::vector<int64_t>& counts,
                                 ExpertMlps& experts) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy,
                                  ExpertMlps& experts) override;

  // Bytes this rank has sent since construction: rows of its own tokens
  // (the forward rows and their output gradients) and rows its experts
  // computed for any rank (outputs and input gradients), blocks kept on
  // this rank included.
  int64_t own_bytes_sent() const { return own_bytes_; }
  int64_t expert_bytes_sent() const { return expert_bytes_; }
  // Host time spent waiting for the row exchanges the experts overlap (the
  // forward rows and the output gradients): the exposed part on gloo. On
  // CUDA the wait is stream-ordered and this is launch time only.
  double exchange_wait_ms() const { return wait_ms_; }

 private:
  struct Splits {
    std::vector<int64_t> send;  // rows to each group rank
    std::vector<int64_t> recv;  // rows from each group rank
  };
  // Sends `rows` (grouped by destination) and runs `compute` over the
  // received runs: the own run first from `rows` while the exchange is in
  // flight (with overlap), the rest once it completed.
  absl::StatusOr<Tensor> ExchangeAndCompute(
      RunContext& ctx, const Splits& splits, const Tensor& rows, const char* what,
      const std::function<absl::StatusOr<Tensor>(const Tensor& received,
                                                 const std::vector<int>& order,
                                                 const ExpertMlps::RowSource& source)>& compute);
  // Expert-side rows back to their tokens' ranks.
  absl::StatusOr<Tensor> Return(RunContext& ctx, const Splits& splits, const Tensor& y,
                                const char* what);

  std::shared_ptr<comm::ProcessGroup> group_;
  const int num_experts_;
  const int local_experts_;
  const bool overlap_;
  int64_t own_bytes_ = 0;
  int64_t expert_bytes_ = 0;
  double wait_ms_ = 0;
};

}  // namespace weft

#endif  // WEFT_STRATEGIES_EXPERT_ALL_TO_ALL_DISPATCHER_H_
