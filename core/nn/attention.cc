#include "core/nn/attention.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

CausalSelfAttention::CausalSelfAttention(int64_t channels, int num_heads, float init_std,
                                         float proj_init_std, float dropout)
    : Module("CausalSelfAttention"), c_(channels), num_heads_(num_heads) {
  qkv_ = RegisterModule("qkv", std::make_unique<Linear>(
                                   channels, 3 * channels, Linear::Options{.init_std = init_std}));
  proj_ = RegisterModule("proj", std::make_unique<Linear>(
                                     channels, channels, Linear::Options{.init_std = proj_init_std}));
  dropout_ = RegisterModule("dropout", std::make_unique<Dropout>(dropout));
}

void CausalSelfAttention::ReleaseActivations() {
  qkv_out_ = Tensor();
  att_ = Tensor();
  lse_ = Tensor();
}

absl::StatusOr<Tensor> CausalSelfAttention::Forward(RunContext& ctx, const Tensor& x) {
  if (x.ndim() != 3 || x.dim(2) != c_) {
    return InvalidArgument("attention input " + ShapeString(x.shape()),
                           absl::StrCat("(B, T, ", c_, ")"));
  }
  const int64_t b = x.dim(0), t = x.dim(1);
  WEFT_ASSIGN_OR_RETURN(qkv_out_, qkv_->CallForward(ctx, x));  // (B, T, 3C)
  WEFT_ASSIGN_OR_RETURN(att_, ctx.Empty({b, t, c_}, ctx.compute_dtype));
  WEFT_ASSIGN_OR_RETURN(lse_, ctx.Empty({b, num_heads_, t}, DType::kF32));
  WEFT_RETURN_IF_ERROR(ctx.ops->AttentionForward(ctx.kernel(), att_, lse_, qkv_out_, num_heads_));
  WEFT_ASSIGN_OR_RETURN(Tensor y, proj_->CallForward(ctx, att_));
  return dropout_->CallForward(ctx, y);
}

absl::StatusOr<Tensor> CausalSelfAttention::Backward(RunContext& ctx, const Tensor& dy) {
  if (!att_.defined()) {
    return FailedPrecondition("attention backward without saved activations",
                              "Forward in training mode before Backward");
  }
  WEFT_ASSIGN_OR_RETURN(Tensor dproj, dropout_->CallBackward(ctx, dy));
  WEFT_ASSIGN_OR_RETURN(Tensor datt, proj_->CallBackward(ctx, dproj));
  WEFT_ASSIGN_OR_RETURN(Tensor dqkv, ctx.Empty(qkv_out_.shape(), ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(
      ctx.ops->AttentionBackward(ctx.kernel(), dqkv, datt, qkv_out_, att_, lse_, num_heads_));
  ReleaseActivations();
  return qkv_->CallBackward(ctx, dqkv);
}

}  // namespace weft
