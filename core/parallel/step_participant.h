// StepParticipant: a strategy's part in the training step beyond module
// hooks. The trainer and the step schedule call every participant, in
// composition order, at these points of each optimizer step:
//
//   ZeroGrad
//   the schedule's forwards and backwards, in its order (step_schedule.h);
//     before each backward: BeforeBackward({micro, last}) (a split
//     backward, zero-bubble pipelines: before each W, where the
//     gradients-ready hooks run, see module.h)
//   FinishGradients               gradients final and synchronized
//   AfterAllGradients(targets)    every participant finished; e.g. sum a
//                                 tied weight's gradients across pipeline ends
//   OptimizerTargets (once, at setup)
//   ReduceGradNormSq              only when clipping
//   optimizer update
//   AfterOptimizerStep            e.g. all-gather updated shards; also
//                                 called once after a checkpoint loads
//                                 (no step ran), to publish loaded state
//
// Gradient scale: each micro-batch's loss is divided by the global batch's
// target count, so after the backwards a rank holds the sum over its own
// samples divided by the global count: 1/dp of its local mean. Summing over
// the data-parallel ranks (as ddp does) gives the global mean; a strategy
// that steps on one rank's gradients alone multiplies them by dp.
//
// All methods default to doing nothing, so a strategy overrides only what it
// changes. Work is stream-ordered on CUDA: "final" means final in stream
// order, not that the host waited.
#ifndef WEFT_CORE_PARALLEL_STEP_PARTICIPANT_H_
#define WEFT_CORE_PARALLEL_STEP_PARTICIPANT_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/optim/optimizer.h"
#include "core/tensor/tensor.h"

namespace weft {

struct BackwardInfo {
  int micro = 0;      // which micro-batch (its activation slot)
  bool last = true;   // the step's last backward
};

class StepParticipant {
 public:
  virtual ~StepParticipant() = default;
  virtual absl::Status ZeroGrad() { return absl::OkStatus(); }
  // True when ZeroGrad clears every parameter gradient itself (e.g. one
  // memset per flat bucket), so the trainer skips its per-parameter zeroing.
  virtual bool ZeroesModelGradients() const { return false; }
  // Before the backward of one micro-batch. `last` is true for the last
  // backward of the step: the gradients this rank holds become final
  // during it (e.g. ddp launches its all-reduces only then).
  virtual absl::Status BeforeBackward(const BackwardInfo& info) {
    (void)info;
    return absl::OkStatus();
  }
  // True when the participant reduces gradients during every backward
  // (zero-2/3, fsdp): each reduction owns its gradient buffer until the
  // next BeforeBackward. A split backward writes weight gradients after
  // later micro-batches' backwards began, so zero-bubble pipelines refuse
  // such participants.
  virtual bool ReducesEveryBackward() const { return false; }
  virtual absl::Status FinishGradients() { return absl::OkStatus(); }
  // After every participant's FinishGradients, with the optimizer's targets
  // (whole gradients, or this rank's shards of them).
  virtual absl::Status AfterAllGradients(const std::vector<OptimTarget>& targets) {
    (void)targets;
    return absl::OkStatus();
  }
  // What this rank's optimizer updates, when the strategy re-placed the
  // parameters (zero, fsdp); nullopt keeps the model's parameters.
  virtual std::optional<std::vector<OptimTarget>> OptimizerTargets() { return std::nullopt; }
  // Completes the squared gradient norm over ranks that hold disjoint parts.
  virtual absl::Status ReduceGradNormSq(Tensor& norm_sq) {
    (void)norm_sq;
    return absl::OkStatus();
  }
  virtual absl::Status AfterOptimizerStep() { return absl::OkStatus(); }
  // Extra per-step numbers for the metrics log (e.g. {"ddp_exposed_comm_ms", 1.2}),
  // measured since the last call.
  virtual void AppendStepMetrics(std::vector<std::pair<std::string, double>>* out) { (void)out; }
};

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_STEP_PARTICIPANT_H_
