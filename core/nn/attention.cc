#include "core/nn/attention.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

CausalSelfAttention::CausalSelfAttention(int64_t channels, int num_heads, float init_std,
                                         float proj_init_std, float dropout)
    : Module("CausalSelfAttention"), c_(channels), num_heads_(num_heads) {
  RegisterSwappableModule("qkv", std::make_unique<Linear>(
                                   channels, 3 * channels, Linear::Options{.init_std = init_std}));
  RegisterSwappableModule("proj", std::make_unique<Linear>(
                                     channels, channels, Linear::Options{.init_std = proj_init_std}));
  // Swappable: ring attention (cp) takes it over with qkv and proj.
  RegisterSwappableModule("dropout", std::make_unique<Dropout>(dropout));
}

int CausalSelfAttention::LocalHeads(int64_t local_channels) const {
  return static_cast<int>(num_heads_ * local_channels / c_);
}

absl::StatusOr<Tensor> CausalSelfAttention::Forward(RunContext& ctx, const Tensor& x) {
  if (x.ndim() != 3 || x.dim(2) != c_) {
    return InvalidArgument("attention input " + ShapeString(x.shape()),
                           absl::StrCat("(B, T, ", c_, ")"));
  }
  if (ctx.sequence.has_value() && !ctx.sequence->IsIdentity()) {
    // Other ranks hold the rest of the sequence: attending to local tokens
    // only would silently drop keys.
    return FailedPrecondition(
        "causal attention over a sequence split across ranks (context parallel chunks)",
        "ring attention (the cp strategy swaps it in for every attention module)",
        "apply --strategy=cp, or do not set RunContext::sequence");
  }
  WEFT_ASSIGN_OR_RETURN(Tensor qkv_out, child("qkv")->CallForward(ctx, x));  // (B, T, 3C)
  // A column-parallel qkv returns whole heads of this rank only (and a
  // sequence-parallel one the whole sequence): sizes come from its output.
  const int64_t b = qkv_out.dim(0), t = qkv_out.dim(1);
  const int64_t c = qkv_out.dim(2) / 3;
  const int heads = LocalHeads(c);
  WEFT_ASSIGN_OR_RETURN(Tensor att, ctx.Empty({b, t, c}, ctx.compute_dtype));
  WEFT_ASSIGN_OR_RETURN(Tensor lse, ctx.Empty({b, heads, t}, DType::kF32));
  WEFT_RETURN_IF_ERROR(ctx.ops->AttentionForward(ctx.kernel(), att, lse, qkv_out, heads));
  if (ctx.training) {
    SavedActivations& saved = ctx.Saved(this);
    saved[kQkv] = qkv_out;
    saved[kAttention] = att;
    saved[kLogSumExp] = lse;
  }
  WEFT_ASSIGN_OR_RETURN(Tensor y, child("proj")->CallForward(ctx, att));
  return child("dropout")->CallForward(ctx, y);
}

absl::StatusOr<Tensor> CausalSelfAttention::Backward(RunContext& ctx, const Tensor& dy) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr) {
    return FailedPrecondition("attention backward without saved activations",
                              "Forward in training mode before Backward");
  }
  WEFT_ASSIGN_OR_RETURN(Tensor dproj, child("dropout")->CallBackward(ctx, dy));
  WEFT_ASSIGN_OR_RETURN(Tensor datt, child("proj")->CallBackward(ctx, dproj));
  const Tensor& qkv_out = (*saved)[kQkv];
  WEFT_ASSIGN_OR_RETURN(Tensor dqkv, ctx.Empty(qkv_out.shape(), ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(ctx.ops->AttentionBackward(ctx.kernel(), dqkv, datt, qkv_out,
                                                  (*saved)[kAttention], (*saved)[kLogSumExp],
                                                  LocalHeads(qkv_out.dim(2) / 3)));
  ctx.DropSaved(this);
  return child("qkv")->CallBackward(ctx, dqkv);
}

}  // namespace weft
