// StepParticipant: a strategy's part in the training step beyond module
// hooks. The trainer calls every participant, in composition order, at these
// points of each optimizer step:
//
//   ZeroGrad
//   for each micro-batch: BeforeMicroStep(i, n); forward; backward
//   FinishGradients               gradients final and synchronized
//   OptimizerTargets (once, at setup)
//   ReduceGradNormSq              only when clipping
//   optimizer update
//   AfterOptimizerStep            e.g. all-gather updated shards
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

class StepParticipant {
 public:
  virtual ~StepParticipant() = default;
  virtual absl::Status ZeroGrad() { return absl::OkStatus(); }
  // True when ZeroGrad clears every parameter gradient itself (e.g. one
  // memset per flat bucket), so the trainer skips its per-parameter zeroing.
  virtual bool ZeroesModelGradients() const { return false; }
  virtual absl::Status BeforeMicroStep(int micro, int num_micro) {
    (void)micro;
    (void)num_micro;
    return absl::OkStatus();
  }
  virtual absl::Status FinishGradients() { return absl::OkStatus(); }
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
