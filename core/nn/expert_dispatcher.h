// ExpertDispatcher: moves a mixture-of-experts layer's token rows to the
// ranks that hold their experts and back. The layer works without one (all
// experts local); the expert strategy installs one that exchanges rows with
// all_to_all_v over the ep group (strategies/expert), which keeps the model
// free of ranks.
//
// One micro-batch, in order:
//   Dispatch          rows grouped by global expert -> rows of this rank's
//                     experts, grouped by local expert
//   Combine           the experts' outputs back, in Dispatch's input order
//   CombineBackward   gradients of Combine's outputs -> local expert order
//   DispatchBackward  gradients of Dispatch's outputs -> Dispatch's input order
// What a dispatcher remembers between them lives in ctx's activation store
// under the micro-batch slot, so micro-batches may interleave.
#ifndef WEFT_CORE_NN_EXPERT_DISPATCHER_H_
#define WEFT_CORE_NN_EXPERT_DISPATCHER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/nn/run_context.h"

namespace weft {

class ExpertDispatcher {
 public:
  virtual ~ExpertDispatcher() = default;
  // x (M, C) grouped by global expert with `counts` (E) rows each; returns
  // (M', C) grouped by local expert and sets `local_counts` (E / ep).
  virtual absl::StatusOr<Tensor> Dispatch(RunContext& ctx, const Tensor& x,
                                          const std::vector<int64_t>& counts,
                                          std::vector<int64_t>* local_counts) = 0;
  virtual absl::StatusOr<Tensor> Combine(RunContext& ctx, const Tensor& y) = 0;
  virtual absl::StatusOr<Tensor> CombineBackward(RunContext& ctx, const Tensor& dy) = 0;
  virtual absl::StatusOr<Tensor> DispatchBackward(RunContext& ctx, const Tensor& dx) = 0;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_EXPERT_DISPATCHER_H_
