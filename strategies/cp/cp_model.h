// ContextParallelModel: the root wrapper cp installs. Every rank of a cp
// group loads the same samples (the data-parallel rank leaves out the cp
// coordinate); the wrapper keeps this rank's zigzag chunks of inputs and
// targets and runs the model on them with RunContext::sequence set, so
// position embeddings and ring attention see global positions. Losses are
// per local target; scaled by the whole sequence's target count, they sum
// over the cp group to the unsplit loss (cp.h).
//
// It also lists the inner model's stages, with LocalBatch giving the chunks
// they run on, so a pipeline applied after cp splits those stages and feeds
// them this rank's chunks without knowing about cp (pp.h).
#ifndef WEFT_STRATEGIES_CP_CP_MODEL_H_
#define WEFT_STRATEGIES_CP_CP_MODEL_H_

#include <memory>
#include <optional>
#include <vector>

#include "core/nn/wrapped_model.h"

namespace weft::cp {

class ContextParallelModel : public WrappedModel {
 public:
  ContextParallelModel(std::unique_ptr<Model> inner, int cp_rank, int cp_size);

  // inputs, targets: (B, T) whole sequences; T divisible by 2 x cp.
  absl::StatusOr<Tensor> ForwardLoss(RunContext& ctx, const Tensor& inputs, const Tensor& targets,
                                     float dloss_scale) override;
  absl::Status BackwardFromLoss(RunContext& ctx) override;
  // Predictions would be chunks scattered over ranks: only the loss
  // interface is offered.
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& inputs) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dprediction) override;

  // The inner model's stages, which run on LocalBatch's chunks.
  std::vector<Stage> Stages() override { return inner().Stages(); }
  // This rank's zigzag chunks of inputs and targets (B, T/cp) and their
  // global positions; T must be divisible by 2 x cp.
  absl::StatusOr<StageBatch> LocalBatch(const RunContext& ctx, const Tensor& inputs,
                                        const Tensor& targets) const override;

  // TargetsPerSample stays the inner model's, of the whole sequence: the
  // trainer scales the loss by it.
  std::string Summary() const override;

 private:
  const int rank_, size_;
  std::optional<TokenChunks> chunks_;  // of the last forward's sequence length
};

}  // namespace weft::cp

#endif  // WEFT_STRATEGIES_CP_CP_MODEL_H_
