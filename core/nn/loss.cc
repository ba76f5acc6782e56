#include "core/nn/loss.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

absl::StatusOr<Tensor> LossModule::CallLoss(RunContext& ctx, const Tensor& prediction,
                                            const Tensor& targets, float dloss_scale) {
  Tensor losses;
  WEFT_RETURN_IF_ERROR(RunHooked(ctx, /*backward=*/false, [&]() -> absl::Status {
    WEFT_ASSIGN_OR_RETURN(losses, ComputeLoss(ctx, prediction, targets, dloss_scale));
    return absl::OkStatus();
  }));
  return losses;
}

absl::StatusOr<Tensor> LossModule::Backward(RunContext& ctx, const Tensor&) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr) {
    return FailedPrecondition("loss backward without a training forward",
                              "ComputeLoss with ctx.training before Backward");
  }
  Tensor grad = (*saved)[0];
  ctx.DropSaved(this);
  return grad;
}

absl::StatusOr<Tensor> LossModule::Forward(RunContext&, const Tensor&) {
  return FailedPrecondition(absl::StrCat(type_name(), " '", name(), "' called without targets"),
                            "CallLoss(ctx, prediction, targets, scale)",
                            "a loss module is the end of the last stage");
}

absl::StatusOr<Tensor> CrossEntropyLoss::ComputeLoss(RunContext& ctx, const Tensor& logits,
                                                     const Tensor& targets, float dloss_scale) {
  if (logits.ndim() != 2 || logits.dim(0) != targets.numel() || logits.dim(1) < num_classes_) {
    return InvalidArgument(
        absl::StrCat("logits ", ShapeString(logits.shape()), " with targets ",
                     ShapeString(targets.shape())),
        absl::StrCat("logits (N, >= ", num_classes_, ") and N targets"));
  }
  WEFT_ASSIGN_OR_RETURN(Tensor losses, ctx.Empty({targets.numel()}, DType::kF32));
  Tensor grad_in_place = logits;  // shares the logits' storage
  WEFT_RETURN_IF_ERROR(ctx.ops->CrossEntropyForwardBackward(
      ctx.kernel(), losses, grad_in_place, targets.View({targets.numel()}), num_classes_, dloss_scale,
      /*compute_grad=*/ctx.training));
  if (ctx.training) SaveGradient(ctx, logits);  // now holds dL/dlogits
  return losses;
}

}  // namespace weft
