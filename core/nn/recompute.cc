#include "core/nn/recompute.h"

#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

absl::StatusOr<Tensor> Recompute::Forward(RunContext& ctx, const Tensor& x) {
  WEFT_ASSIGN_OR_RETURN(Tensor y, inner_->CallForward(ctx, x));
  if (ctx.training) {
    inner_->ReleaseActivationsRecursive(ctx);
    ctx.Saved(this)[0] = x;
  }
  return y;
}

absl::StatusOr<Tensor> Recompute::Backward(RunContext& ctx, const Tensor& dy) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr) {
    return FailedPrecondition("recompute backward without a saved input",
                              "Forward in training mode before Backward");
  }
  // Same ctx (same dropout seed) as the first forward: identical activations.
  const Tensor input = (*saved)[0];
  ctx.DropSaved(this);
  const bool was_recomputing = ctx.recomputing;
  ctx.recomputing = true;
  const absl::Status replay = inner_->CallForward(ctx, input).status();
  ctx.recomputing = was_recomputing;
  WEFT_RETURN_IF_ERROR(replay);
  return inner_->CallBackward(ctx, dy);
}

absl::Status EnableRecompute(Module& parent, const std::string& child) {
  auto wrapper = std::make_unique<Recompute>();
  Recompute* raw = wrapper.get();
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Module> inner, parent.ReplaceChild(child, std::move(wrapper)));
  // The inner module keeps the names it had: it sits under the wrapper with
  // an empty local name.
  raw->inner_ = raw->RegisterModule("", std::move(inner));
  return absl::OkStatus();
}

}  // namespace weft
