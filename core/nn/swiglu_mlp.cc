#include "core/nn/swiglu_mlp.h"

#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/linear.h"

namespace weft {

SwiGluMlp::SwiGluMlp(int64_t channels, int64_t hidden, float init_std, float proj_init_std)
    : Module("SwiGluMlp") {
  RegisterSwappableModule(
      "gate_up", std::make_unique<Linear>(channels, 2 * hidden,
                                          Linear::Options{.bias = false, .init_std = init_std}));
  RegisterSwappableModule(
      "down", std::make_unique<Linear>(hidden, channels,
                                       Linear::Options{.bias = false, .init_std = proj_init_std}));
}

absl::StatusOr<Tensor> SwiGluMlp::Forward(RunContext& ctx, const Tensor& x) {
  WEFT_ASSIGN_OR_RETURN(Tensor gu, child("gate_up")->CallForward(ctx, x));
  Shape hs = gu.shape();
  hs.back() /= 2;  // a column-parallel gate_up gives this rank's share
  WEFT_ASSIGN_OR_RETURN(Tensor h, ctx.Empty(hs, ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(ctx.ops->SwiGluForward(ctx.kernel(), h, gu));
  if (ctx.training) ctx.Saved(this)[kGateUp] = gu;
  return child("down")->CallForward(ctx, h);
}

absl::StatusOr<Tensor> SwiGluMlp::Backward(RunContext& ctx, const Tensor& dy) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr) {
    return FailedPrecondition("SwiGLU backward without saved activations",
                              "Forward in training mode before Backward");
  }
  WEFT_ASSIGN_OR_RETURN(Tensor dh, child("down")->CallBackward(ctx, dy));
  const Tensor gu = (*saved)[kGateUp];
  ctx.DropSaved(this);
  WEFT_ASSIGN_OR_RETURN(Tensor dgu, ctx.Empty(gu.shape(), ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(ctx.ops->SwiGluBackward(ctx.kernel(), dgu, dh, gu));
  return child("gate_up")->CallBackward(ctx, dgu);
}

}  // namespace weft
