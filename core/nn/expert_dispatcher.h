// ExpertDispatcher: runs a mixture-of-experts layer's token rows through
// experts some of which live on other ranks. The layer works without one
// (all experts local); the expert strategy installs one that exchanges rows
// with all_to_all_v over the ep group (strategies/expert), which keeps the
// model free of ranks.
//
// One micro-batch, in order:
//   Forward   rows grouped by global expert -> to the experts' ranks, through
//             the local experts (ExpertMlps, in runs), back in input order
//   Backward  gradients of Forward's outputs -> gradients of its inputs,
//             accumulating the local experts' gradients
// The dispatcher drives the experts itself, so it can compute the rows it
// already holds while the exchange of the others is in flight. What it
// remembers between the two lives in ctx's activation store under the
// micro-batch slot, so micro-batches may interleave.
#ifndef WEFT_CORE_NN_EXPERT_DISPATCHER_H_
#define WEFT_CORE_NN_EXPERT_DISPATCHER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/nn/expert_mlps.h"
#include "core/nn/run_context.h"

namespace weft {

class ExpertDispatcher {
 public:
  virtual ~ExpertDispatcher() = default;
  // x (M, C) grouped by global expert with `counts` (E) rows each -> the
  // experts' outputs (M, C) in the same order.
  virtual absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x,
                                         const std::vector<int64_t>& counts,
                                         ExpertMlps& experts) = 0;
  // dy (M, C) of Forward's output -> dx (M, C) of its input.
  virtual absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy,
                                          ExpertMlps& experts) = 0;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_EXPERT_DISPATCHER_H_
