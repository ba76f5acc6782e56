#include "core/nn/model.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/moe.h"

namespace weft {
namespace {

absl::StatusOr<std::vector<Stage>> CheckedStages(Model& model) {
  std::vector<Stage> stages = model.Stages();
  if (stages.empty() || stages.back().loss == nullptr) {
    return FailedPrecondition(
        absl::StrCat(model.type_name(), " lists no stages ending in a loss"),
        "Model::Stages() with a LossModule on the last stage",
        "or override ForwardLoss/BackwardFromLoss");
  }
  return stages;
}

// The stages without the loss: inputs -> prediction.
std::vector<Stage> WithoutLoss(std::vector<Stage> stages) {
  stages.back().loss = nullptr;
  if (stages.back().modules.empty()) stages.pop_back();
  return stages;
}

}  // namespace

absl::StatusOr<Tensor> Model::ForwardLoss(RunContext& ctx, const Tensor& inputs,
                                          const Tensor& targets, float dloss_scale) {
  WEFT_ASSIGN_OR_RETURN(std::vector<Stage> stages, CheckedStages(*this));
  ctx.dloss_scale = dloss_scale;  // for layers with auxiliary losses (MoE)
  Tensor losses;
  WEFT_RETURN_IF_ERROR(RunHooked(ctx, /*backward=*/false, [&]() -> absl::Status {
    WEFT_ASSIGN_OR_RETURN(losses, ForwardStages(ctx, stages, 0, static_cast<int>(stages.size()),
                                                inputs, {&targets, dloss_scale}));
    return absl::OkStatus();
  }));
  return losses;
}

absl::Status Model::BackwardFromLoss(RunContext& ctx) {
  WEFT_ASSIGN_OR_RETURN(std::vector<Stage> stages, CheckedStages(*this));
  return RunHooked(ctx, /*backward=*/true, [&]() -> absl::Status {
    return BackwardStages(ctx, stages, 0, static_cast<int>(stages.size()), Tensor()).status();
  });
}

absl::StatusOr<Tensor> Model::Forward(RunContext& ctx, const Tensor& inputs) {
  WEFT_ASSIGN_OR_RETURN(std::vector<Stage> stages, CheckedStages(*this));
  stages = WithoutLoss(std::move(stages));
  return ForwardStages(ctx, stages, 0, static_cast<int>(stages.size()), inputs);
}

absl::StatusOr<Tensor> Model::Backward(RunContext& ctx, const Tensor& dprediction) {
  WEFT_ASSIGN_OR_RETURN(std::vector<Stage> stages, CheckedStages(*this));
  stages = WithoutLoss(std::move(stages));
  return BackwardStages(ctx, stages, 0, static_cast<int>(stages.size()), dprediction);
}

void Model::AppendStepMetrics(std::vector<std::pair<std::string, double>>* out) {
  AppendMoeMetrics(*this, out);
}

absl::StatusOr<int64_t> ProbeSequenceLength(const Model& model, const RunContext& ctx) {
  absl::StatusOr<std::pair<Tensor, Tensor>> probe = model.ProbeInputs(ctx);
  if (absl::IsUnimplemented(probe.status())) return -1;
  if (!probe.ok()) return probe.status();
  if (probe->first.ndim() < 2) return -1;
  return probe->first.dim(1);
}

}  // namespace weft
