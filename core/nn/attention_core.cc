#include "core/nn/attention_core.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

CausalAttentionCore::CausalAttentionCore(int64_t head_dim)
    : Module("CausalAttentionCore"), head_dim_(head_dim) {}

absl::StatusOr<Tensor> CausalAttentionCore::Forward(RunContext& ctx, const Tensor& qkv) {
  if (qkv.ndim() != 3 || qkv.dim(2) % (3 * head_dim_) != 0) {
    return InvalidArgument("attention qkv " + ShapeString(qkv.shape()),
                           absl::StrCat("(B, T, 3 x heads x ", head_dim_, ")"));
  }
  if (ctx.sequence.has_value() && !ctx.sequence->IsIdentity()) {
    // Other ranks hold the rest of the sequence: attending to local tokens
    // only would silently drop keys.
    return FailedPrecondition(
        "causal attention over a sequence split across ranks (context parallel chunks)",
        "ring attention (the cp strategy swaps it in for every attention core)",
        "apply --strategy=cp, or do not set RunContext::sequence");
  }
  const int64_t b = qkv.dim(0), t = qkv.dim(1), w = qkv.dim(2) / 3;
  const int heads = static_cast<int>(w / head_dim_);
  WEFT_ASSIGN_OR_RETURN(Tensor att, ctx.Empty({b, t, w}, ctx.compute_dtype));
  WEFT_ASSIGN_OR_RETURN(Tensor lse, ctx.Empty({b, heads, t}, DType::kF32));
  WEFT_RETURN_IF_ERROR(ctx.ops->AttentionForward(ctx.kernel(), att, lse, qkv, heads));
  if (ctx.training) {
    SavedActivations& saved = ctx.Saved(this);
    saved[kQkv] = qkv;
    saved[kAttention] = att;
    saved[kLogSumExp] = lse;
  }
  return att;
}

absl::StatusOr<Tensor> CausalAttentionCore::Backward(RunContext& ctx, const Tensor& dout) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr) {
    return FailedPrecondition("attention backward without saved activations",
                              "Forward in training mode before Backward");
  }
  const Tensor qkv = (*saved)[kQkv];
  WEFT_ASSIGN_OR_RETURN(Tensor dqkv, ctx.Empty(qkv.shape(), ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(ctx.ops->AttentionBackward(ctx.kernel(), dqkv, dout, qkv,
                                                  (*saved)[kAttention], (*saved)[kLogSumExp],
                                                  static_cast<int>(qkv.dim(2) / 3 / head_dim_)));
  ctx.DropSaved(this);
  return dqkv;
}

}  // namespace weft
