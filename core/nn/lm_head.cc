#include "core/nn/lm_head.h"

#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

LmHead::LmHead(int64_t vocab_rows, int64_t channels, float init_std)
    : Module("LmHead"), tied_(false) {
  weight_ = RegisterParameter("weight", {vocab_rows, channels}, InitSpec::Normal(init_std), true);
}

LmHead::LmHead(Parameter* table) : Module("LmHead"), weight_(table), tied_(true) {
  table->MarkShared();
}

absl::StatusOr<Tensor> LmHead::Forward(RunContext& ctx, const Tensor& h) {
  const int64_t c = weight_->shape()[1];
  Tensor h2 = h.View({h.numel() / c, c});
  WEFT_ASSIGN_OR_RETURN(Tensor logits, ctx.Empty({h2.dim(0), weight_->shape()[0]},
                                                 ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(ctx.ops->Gemm(
      ctx.kernel(), {.out = logits, .a = h2, .b = weight_->value, .trans_b = true}));
  if (ctx.training) {
    SavedActivations& saved = ctx.Saved(this);
    saved[0] = h2;
    saved.shape = h.shape();  // dh comes back in the input's shape
  }
  return logits;
}

absl::StatusOr<Tensor> LmHead::Backward(RunContext& ctx, const Tensor& dlogits) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr) {
    return FailedPrecondition("lm head backward without saved input",
                              "ForwardLoss in training mode before BackwardFromLoss");
  }
  // dW += dlogits^T . h, now or at the schedule's W.
  auto weight_grad = [ops = ctx.ops, k = ctx.kernel(), w = weight_, dlogits, h = (*saved)[0]]() {
    return ops->Gemm(k, {.out = w->grad, .a = dlogits, .b = h, .trans_a = true, .accumulate = true});
  };
  if (ctx.defer_weight_grads) {
    ctx.store().Defer(ctx.slot, std::move(weight_grad));
  } else {
    WEFT_RETURN_IF_ERROR(weight_grad());
  }
  WEFT_ASSIGN_OR_RETURN(Tensor dh, ctx.Empty((*saved)[0].shape(), ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(
      ctx.ops->Gemm(ctx.kernel(), {.out = dh, .a = dlogits, .b = weight_->value}));
  const Shape in_shape = saved->shape;
  ctx.DropSaved(this);
  return dh.View(in_shape);
}

}  // namespace weft
