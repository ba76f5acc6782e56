// Expert tensor parallelism (Megatron's): a mixture-of-experts layer's
// experts split by hidden units over the tp ranks, like a column-parallel
// fc and a row-parallel proj per expert. Every tp rank routes the same
// tokens (the router is replicated, its input whole on each rank), sends
// the same rows to its ep peers of the same tp position, and computes 1/tp
// of each expert's hidden units: no expert computation is repeated across
// tp. The partial outputs are summed over tp once after the experts
// (forward) and the partial input gradients once before the rows go back
// (backward): 2 all-reduces of the expert rows per layer and micro-batch.
//
// Every tp rank then holds the whole output and its gradient, so the
// router's and the output bias's gradients are whole (replicated, not summed), and
// the split weights' gradients are each rank's own slice.
#ifndef WEFT_STRATEGIES_TP_PARALLEL_EXPERTS_H_
#define WEFT_STRATEGIES_TP_PARALLEL_EXPERTS_H_

#include "absl/status/status.h"
#include "core/nn/expert_mlps.h"
#include "core/parallel/strategy.h"
#include "strategies/tp/tp_comm.h"

namespace weft::tp {

// Splits the experts' hidden units over tp along the dimensions
// ExpertMlps::HiddenSplits() names (GPT-2's fc and proj, or SwiGLU's packed
// gate_up and down), slicing held values, and installs the sums over tp. An error when
// the hidden size does not divide by tp.
absl::Status SplitExperts(ExpertMlps& experts, const TpComm& tp, StrategyContext& ctx);

}  // namespace weft::tp

#endif  // WEFT_STRATEGIES_TP_PARALLEL_EXPERTS_H_
