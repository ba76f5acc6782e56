// Model: the root module of a trainable network. The runtime drives it
// through a loss-centric interface so it never needs to know the model's
// architecture, and the model never needs to know about ranks or strategies.
#ifndef WEFT_CORE_NN_MODEL_H_
#define WEFT_CORE_NN_MODEL_H_

#include <cstdint>
#include <memory>

#include "core/nn/module.h"

namespace weft {

class Model : public Module {
 public:
  using Module::Module;

  // Forward pass to one f32 loss per target (on the device). In training
  // mode it also prepares dL/dlogits scaled by dloss_scale, for
  // BackwardFromLoss (the loss being sum(losses) * dloss_scale).
  virtual absl::StatusOr<Tensor> ForwardLoss(RunContext& ctx, const Tensor& inputs,
                                             const Tensor& targets, float dloss_scale) = 0;
  // Backward from the loss prepared by the last ForwardLoss; accumulates
  // parameter gradients.
  virtual absl::Status BackwardFromLoss(RunContext& ctx) = 0;

  // Training FLOPs (forward + backward) per target, for MFU.
  virtual double TrainingFlopsPerTarget() const = 0;
  // A new model of the same architecture and configuration, with
  // unmaterialized parameters (replicas for single-process data parallel).
  virtual absl::StatusOr<std::unique_ptr<Model>> CloneArchitecture() const = 0;

  // One line for logs, e.g. "GPT 12L 12H 768d vocab 50257".
  virtual std::string Summary() const { return type_name(); }
  // Targets per sample (T for a language model, 1 for a classifier).
  virtual int64_t TargetsPerSample(const Tensor& targets) const {
    return targets.numel() / targets.dim(0);
  }
};

}  // namespace weft

#endif  // WEFT_CORE_NN_MODEL_H_
