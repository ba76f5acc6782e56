// CausalLm: what every decoder-only language model shares, whatever its
// blocks are (GPT-2, Llama). The model registers children named "embed"
// (tokens -> (B, T, C)), "blocks" (a Sequential of (B, T, C) blocks),
// "ln_f", "lm_head" and "loss"; CausalLm gives it the stages, the stage
// inputs, the probe batch and the FLOPs count from those names.
#ifndef WEFT_CORE_NN_CAUSAL_LM_H_
#define WEFT_CORE_NN_CAUSAL_LM_H_

#include <string>
#include <utility>
#include <vector>

#include "core/nn/model.h"
#include "core/nn/sequential.h"

namespace weft {

struct CausalLmShape {
  int64_t seq_len = 0;
  int64_t channels = 0;         // the residual stream's width
  int64_t vocab_size = 0;       // real tokens (probe inputs stay below it)
  int n_layer = 0;
  int64_t attention_width = 0;  // query heads x head size
  // Of the parameters under ".experts.", the share one token uses (top_k / experts).
  double expert_fraction = 1.0;
};

class CausalLm : public Model {
 public:
  // inputs, targets: (B, T) i32. Returns losses (B*T) f32.
  absl::StatusOr<Tensor> ForwardLoss(RunContext& ctx, const Tensor& inputs, const Tensor& targets,
                                     float dloss_scale) override;
  // "embed", "blocks.i", "head" (ln_f, lm_head, cross-entropy).
  std::vector<Stage> Stages() override;
  // The residual stream (B, T, C) in the compute dtype, for every stage but the embedding.
  absl::StatusOr<StageTensor> StageInput(const RunContext& ctx, const StageBatch& part,
                                         int stage) const override;
  // (1, T) tokens and next tokens of a fixed pattern.
  absl::StatusOr<std::pair<Tensor, Tensor>> ProbeInputs(const RunContext& ctx) const override;
  // 6 N (active parameters) + attention's 6 L T width, causal.
  double TrainingFlopsPerTarget() const override;

  Sequential* blocks() const { return dynamic_cast<Sequential*>(child("blocks")); }
  const CausalLmShape& lm_shape() const { return shape_; }

 protected:
  CausalLm(std::string type_name, const CausalLmShape& shape)
      : Model(std::move(type_name)), shape_(shape) {}

 private:
  const CausalLmShape shape_;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_CAUSAL_LM_H_
