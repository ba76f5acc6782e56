#include "core/nn/causal_lm.h"

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/loss.h"

namespace weft {

absl::StatusOr<Tensor> CausalLm::ForwardLoss(RunContext& ctx, const Tensor& inputs,
                                             const Tensor& targets, float dloss_scale) {
  if (inputs.shape() != targets.shape() || inputs.ndim() != 2) {
    return InvalidArgument("inputs " + ShapeString(inputs.shape()) + " and targets " +
                               ShapeString(targets.shape()),
                           "equal shapes (B, T)");
  }
  return Model::ForwardLoss(ctx, inputs, targets, dloss_scale);
}

std::vector<Stage> CausalLm::Stages() {
  std::vector<Stage> stages;
  stages.push_back({.name = "embed", .modules = {child("embed")}});
  for (Module* block : blocks()->children()) {
    stages.push_back({.name = block->name(), .modules = {block}});
  }
  stages.push_back({.name = "head",
                    .modules = {child("ln_f"), child("lm_head")},
                    .loss = dynamic_cast<LossModule*>(child("loss"))});
  return stages;
}

absl::StatusOr<StageTensor> CausalLm::StageInput(const RunContext& ctx, const StageBatch& part,
                                                 int stage) const {
  // Every stage after the embedding takes the residual stream.
  const int stages = shape_.n_layer + 2;
  if (stage < 1 || stage >= stages || part.inputs.ndim() != 2) {
    return InvalidArgument(absl::StrCat("the input of stage ", stage, " for inputs ",
                                        part.inputs.DebugString()),
                           absl::StrCat("a stage in [1, ", stages, ") and (B, T) inputs"));
  }
  return StageTensor{{part.inputs.dim(0), part.inputs.dim(1), shape_.channels},
                     ctx.compute_dtype};
}

double CausalLm::TrainingFlopsPerTarget() const {
  double n = 0;
  for (Parameter* p : const_cast<CausalLm*>(this)->Parameters()) {
    const bool expert = p->name().find(".experts.") != std::string::npos;
    n += static_cast<double>(p->global_numel()) * (expert ? shape_.expert_fraction : 1.0);
  }
  // 6N for the matmuls with weights (forward + backward), plus attention's
  // scores and weighted sum: 6 * L * T * width with causal masking.
  return 6.0 * n + 6.0 * shape_.n_layer * static_cast<double>(shape_.seq_len) *
                       static_cast<double>(shape_.attention_width);
}

absl::StatusOr<std::pair<Tensor, Tensor>> CausalLm::ProbeInputs(const RunContext& ctx) const {
  const int64_t t = shape_.seq_len;
  std::vector<int32_t> tokens(t + 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 7 + 3) % shape_.vocab_size);
  }
  WEFT_ASSIGN_OR_RETURN(
      Tensor x, Tensor::FromVector<int32_t>(absl::MakeConstSpan(tokens.data(), t), {1, t}));
  WEFT_ASSIGN_OR_RETURN(
      Tensor y, Tensor::FromVector<int32_t>(absl::MakeConstSpan(tokens.data() + 1, t), {1, t}));
  WEFT_ASSIGN_OR_RETURN(x, x.To(ctx.device, ctx.stream));
  WEFT_ASSIGN_OR_RETURN(y, y.To(ctx.device, ctx.stream));
  return std::make_pair(std::move(x), std::move(y));
}

}  // namespace weft
