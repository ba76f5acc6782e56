// LossModule: the module a model's last stage ends in. It turns the
// prediction and the targets into one f32 loss per target, and in training
// prepares dL/dprediction for its Backward, so a strategy can swap it (a
// vocab-parallel cross-entropy) like any other module.
//
// CrossEntropyLoss: softmax cross-entropy over the first `num_classes`
// columns of the logits (columns past it are vocabulary padding). The
// gradient is written in place of the logits by the fused kernel.
#ifndef WEFT_CORE_NN_LOSS_H_
#define WEFT_CORE_NN_LOSS_H_

#include <cstdint>

#include "core/nn/module.h"

namespace weft {

class LossModule : public Module {
 public:
  using Module::Module;

  // prediction (N, ...) and targets -> losses (one per target). In training
  // dL/dprediction, scaled by dloss_scale, is saved for Backward (the loss
  // being sum(losses) * dloss_scale).
  virtual absl::StatusOr<Tensor> ComputeLoss(RunContext& ctx, const Tensor& prediction,
                                             const Tensor& targets, float dloss_scale) = 0;
  // ComputeLoss between this module's forward hooks.
  absl::StatusOr<Tensor> CallLoss(RunContext& ctx, const Tensor& prediction,
                                  const Tensor& targets, float dloss_scale);

  // A loss needs targets: Forward alone is an error.
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  // Returns (and releases) the dL/dprediction ComputeLoss saved.
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

 protected:
  // For ComputeLoss in training: `grad` is what Backward returns.
  void SaveGradient(RunContext& ctx, const Tensor& grad) { ctx.Saved(this)[0] = grad; }
};

class CrossEntropyLoss : public LossModule {
 public:
  explicit CrossEntropyLoss(int64_t num_classes)
      : LossModule("CrossEntropyLoss"), num_classes_(num_classes) {}

  // logits (N, >= num_classes), targets (N) or any shape of N ids.
  absl::StatusOr<Tensor> ComputeLoss(RunContext& ctx, const Tensor& logits, const Tensor& targets,
                                     float dloss_scale) override;
  // Returns dL/dlogits of the micro-batch ctx.slot; `dy` is ignored.
  int64_t num_classes() const { return num_classes_; }

 private:
  const int64_t num_classes_;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_LOSS_H_
