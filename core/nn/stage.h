// Stage: a contiguous piece of a model with one input and one output tensor,
// so a pipeline can run any range of stages from a received activation and
// a received gradient. A model lists its stages in order (Model::Stages):
// for a GPT, the embedding, each block, then final norm + head + loss.
//
// Forward of a stage runs its modules in order through CallForward (their
// hooks fire); the last stage ends in a LossModule and returns the
// per-target losses. Backward runs them in reverse, from the output's
// gradient (nothing for the loss stage) to the input's (undefined for
// token ids). Modules wrapped for recompute are stages like any other.
#ifndef WEFT_CORE_NN_STAGE_H_
#define WEFT_CORE_NN_STAGE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/nn/loss.h"
#include "core/nn/module.h"

namespace weft {

struct Stage {
  std::string name;               // "embed", "blocks.3", "head"
  std::vector<Module*> modules;   // forward order
  LossModule* loss = nullptr;     // set on the last stage: runs after `modules`

  // Parameters the stage reads: owned by its modules or borrowed (a tied
  // head's table), each once.
  std::vector<Parameter*> Parameters() const;
};

// What the last stage needs besides its input.
struct LossInputs {
  const Tensor* targets = nullptr;
  float dloss_scale = 1.0f;
};

// One micro-batch as a model's stages take it (Model::LocalBatch): the
// first stage's inputs, the loss stage's targets, and where these tokens
// sit in the whole sequence, for RunContext::sequence while any of the
// stages runs (unset: the tokens are the whole sequence).
struct StageBatch {
  Tensor inputs, targets;
  std::optional<TokenChunks> sequence;
};

// The shape and dtype of a tensor passed between stages (Model::StageInput):
// what a pipeline stage receives, stated before it arrives.
struct StageTensor {
  Shape shape;
  DType dtype = DType::kF32;

  static StageTensor Of(const Tensor& t) { return {t.shape(), t.dtype()}; }
  bool operator==(const StageTensor& o) const { return shape == o.shape && dtype == o.dtype; }
  std::string ToString() const;  // "(2, 16, 32) bf16"
};

// x -> the stage's output (the losses for the loss stage, which needs `loss`).
absl::StatusOr<Tensor> ForwardStage(RunContext& ctx, const Stage& stage, const Tensor& x,
                                    const LossInputs& loss = {});
// dL/doutput -> dL/dinput (dy is ignored for the loss stage).
absl::StatusOr<Tensor> BackwardStage(RunContext& ctx, const Stage& stage, const Tensor& dy);

// Runs stages [first, last) forward from x, and backward from dy.
absl::StatusOr<Tensor> ForwardStages(RunContext& ctx, const std::vector<Stage>& stages, int first,
                                     int last, const Tensor& x, const LossInputs& loss = {});
absl::StatusOr<Tensor> BackwardStages(RunContext& ctx, const std::vector<Stage>& stages,
                                      int first, int last, const Tensor& dy);

// Parameters read by more than one stage (tied embedding and head), with
// the indexes of those stages: a pipeline that puts them on different ranks
// holds the weight on both and sums their gradients.
struct SharedParameter {
  Parameter* param;
  std::vector<int> stages;
};
std::vector<SharedParameter> ParametersSharedAcrossStages(const std::vector<Stage>& stages);

}  // namespace weft

#endif  // WEFT_CORE_NN_STAGE_H_
