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
  h_ = h.View({h.numel() / c, c});
  WEFT_ASSIGN_OR_RETURN(Tensor logits, ctx.Empty({h_.dim(0), weight_->shape()[0]},
                                                 ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(ctx.ops->Gemm(
      ctx.kernel(), {.out = logits, .a = h_, .b = weight_->value, .trans_b = true}));
  return logits;
}

absl::StatusOr<Tensor> LmHead::Backward(RunContext& ctx, const Tensor& dlogits) {
  if (!h_.defined()) {
    return FailedPrecondition("lm head backward without saved input",
                              "ForwardLoss in training mode before BackwardFromLoss");
  }
  WEFT_RETURN_IF_ERROR(ctx.ops->Gemm(
      ctx.kernel(),
      {.out = weight_->grad, .a = dlogits, .b = h_, .trans_a = true, .accumulate = true}));
  WEFT_ASSIGN_OR_RETURN(Tensor dh, ctx.Empty(h_.shape(), ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(
      ctx.ops->Gemm(ctx.kernel(), {.out = dh, .a = dlogits, .b = weight_->value}));
  h_ = Tensor();
  return dh;
}

}  // namespace weft
