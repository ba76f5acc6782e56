// Model: the root module of a trainable network. The runtime drives it
// through a loss-centric interface so it never needs to know the model's
// architecture, and the model never needs to know about ranks or strategies.
#ifndef WEFT_CORE_NN_MODEL_H_
#define WEFT_CORE_NN_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/nn/module.h"
#include "core/nn/tp_plan.h"
#include "core/nn/stage.h"

namespace weft {

class Model : public Module {
 public:
  using Module::Module;

  // The model as an ordered list of stages (see stage.h): stage i's output
  // is stage i+1's input, the first takes the inputs, the last ends in the
  // loss. Built from the current tree, so wrappers (recompute) and swapped
  // modules show up. Empty for a model that cannot be split.
  virtual std::vector<Stage> Stages() { return {}; }

  // The part of a micro-batch (inputs, targets: (B, T, ...)) that Stages()
  // run on, for callers that run the stages themselves instead of
  // ForwardLoss (a pipeline, stage timing). A wrapper that runs its model on
  // part of every sample narrows the batch here (context parallelism: this
  // rank's chunks of each sequence, and their global positions); those
  // callers cannot know the wrapper, and ForwardLoss does the same
  // narrowing inside. Default: the whole batch, ctx.sequence unchanged.
  virtual absl::StatusOr<StageBatch> LocalBatch(const RunContext& ctx, const Tensor& inputs,
                                                const Tensor& targets) const {
    return StageBatch{inputs, targets, ctx.sequence};
  }

  // The tensor stage `stage` (> 0) of Stages() takes as input, for a
  // micro-batch whose LocalBatch is `part`: what the previous stage
  // outputs, before any strategy reshapes it (ParallelState::stage_boundary).
  // A pipeline checks every tensor it receives against this statement, so
  // every real pipeline run verifies it, and a dry run (the memory
  // estimate), whose links deliver nothing, allocates what it states.
  // Unimplemented: the model does not say (pipelines still run; dry runs
  // of them cannot).
  virtual absl::StatusOr<StageTensor> StageInput(const RunContext& ctx, const StageBatch& part,
                                                 int stage) const {
    (void)ctx, (void)part;
    return absl::UnimplementedError(
        absl::StrCat(type_name(), " does not state the input of its stage ", stage));
  }

  // Forward pass to one f32 loss per target (on the device), through every
  // stage between the root's forward hooks. In training it also prepares
  // dL/dprediction scaled by dloss_scale for BackwardFromLoss (the loss
  // being sum(losses) * dloss_scale), in the micro-batch slot ctx.slot.
  virtual absl::StatusOr<Tensor> ForwardLoss(RunContext& ctx, const Tensor& inputs,
                                             const Tensor& targets, float dloss_scale);
  // Backward of the micro-batch ctx.slot from the loss its ForwardLoss
  // prepared, between the root's backward hooks; accumulates gradients.
  virtual absl::Status BackwardFromLoss(RunContext& ctx);
  // inputs -> prediction (every stage but the loss), e.g. logits.
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& inputs) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dprediction) override;

  // A one-sample (inputs, targets) pair of the model's input shape, for
  // probes such as timing each stage before a pipeline split; Unimplemented
  // for a model that cannot make one.
  virtual absl::StatusOr<std::pair<Tensor, Tensor>> ProbeInputs(const RunContext& ctx) const {
    (void)ctx;
    return absl::UnimplementedError(type_name() + " makes no probe inputs");
  }

  // Training FLOPs (forward + backward) per target, for MFU.
  virtual double TrainingFlopsPerTarget() const = 0;
  // A new model of the same architecture and configuration, with
  // unmaterialized parameters (replicas for single-process data parallel).
  virtual absl::StatusOr<std::unique_ptr<Model>> CloneArchitecture() const = 0;

  // Per-step numbers the model measures itself (MoE routing statistics),
  // since the last call; appended to the step's metrics by the trainer.
  virtual void AppendStepMetrics(std::vector<std::pair<std::string, double>>* out);

  // How the model splits over tensor-parallel ranks (parallel_plan.h);
  // empty: the model has no plan and cannot use tp.
  virtual TensorParallelPlan ParallelPlan() const { return {}; }

  // One line for logs, e.g. "GPT 12L 12H 768d vocab 50257".
  virtual std::string Summary() const { return type_name(); }
  // Targets per sample (T for a language model, 1 for a classifier).
  virtual int64_t TargetsPerSample(const Tensor& targets) const {
    return targets.numel() / targets.dim(0);
  }
};

// The sequence length (dimension 1) of the model's probe inputs, so
// strategies that split sequences can check it when applied rather than at
// the first forward; -1 for a model that makes no probe inputs.
absl::StatusOr<int64_t> ProbeSequenceLength(const Model& model, const RunContext& ctx);

}  // namespace weft

#endif  // WEFT_CORE_NN_MODEL_H_
