#include "core/nn/gqa_attention.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/attention_core.h"
#include "core/nn/layer_norm.h"
#include "core/nn/linear.h"

namespace weft {

GroupedQueryAttention::GroupedQueryAttention(const GqaAttentionConfig& c,
                                             std::shared_ptr<RopeTable> rope)
    : Module("GroupedQueryAttention"), config_(c), rope_(std::move(rope)) {
  const Linear::Options in{.bias = false, .init_std = c.init_std};
  RegisterSwappableModule("q", std::make_unique<Linear>(c.channels, c.num_heads * c.head_dim, in));
  RegisterSwappableModule("k",
                          std::make_unique<Linear>(c.channels, c.num_kv_heads * c.head_dim, in));
  RegisterSwappableModule("v",
                          std::make_unique<Linear>(c.channels, c.num_kv_heads * c.head_dim, in));
  RegisterSwappableModule(
      "proj", std::make_unique<Linear>(c.num_heads * c.head_dim, c.channels,
                                       Linear::Options{.bias = false, .init_std = c.proj_init_std}));
  RegisterSwappableModule("core", std::make_unique<CausalAttentionCore>(c.head_dim));
  if (c.qk_norm) {
    RegisterModule("q_norm", std::make_unique<LayerNorm>(c.head_dim, c.norm_eps, NormKind::kRms));
    RegisterModule("k_norm", std::make_unique<LayerNorm>(c.head_dim, c.norm_eps, NormKind::kRms));
  }
}

absl::StatusOr<Tensor> GroupedQueryAttention::NormHeads(RunContext& ctx, const char* norm,
                                                        const Tensor& x) {
  if (!config_.qk_norm) return x;
  const int64_t d = config_.head_dim;
  WEFT_ASSIGN_OR_RETURN(Tensor y, child(norm)->CallForward(
                                      ctx, x.View({x.dim(0), x.dim(1), x.dim(2) / d, d})));
  return y.View(x.shape());
}

absl::StatusOr<Tensor> GroupedQueryAttention::NormHeadsBackward(RunContext& ctx, const char* norm,
                                                                const Tensor& dy) {
  if (!config_.qk_norm) return dy;
  const int64_t d = config_.head_dim;
  WEFT_ASSIGN_OR_RETURN(Tensor dx, child(norm)->CallBackward(
                                       ctx, dy.View({dy.dim(0), dy.dim(1), dy.dim(2) / d, d})));
  return dx.View(dy.shape());
}

absl::StatusOr<TokenChunks> GroupedQueryAttention::Positions(const RunContext& ctx,
                                                             int64_t t) const {
  if (!ctx.sequence.has_value()) return TokenChunks::Contiguous(t);
  if (ctx.sequence->size() != t) {
    return FailedPrecondition(
        absl::StrCat("q, k and v of ", t, " tokens on a rank holding ", ctx.sequence->size(),
                     " tokens of each sequence"),
        "projections of the rank's whole chunks",
        "under sp the column-parallel projections must gather the sequence blocks");
  }
  return *ctx.sequence;
}

absl::StatusOr<Tensor> GroupedQueryAttention::Forward(RunContext& ctx, const Tensor& x) {
  if (x.ndim() != 3 || x.dim(2) != config_.channels) {
    return InvalidArgument("attention input " + ShapeString(x.shape()),
                           absl::StrCat("(B, T, ", config_.channels, ")"));
  }
  WEFT_ASSIGN_OR_RETURN(Tensor q, child("q")->CallForward(ctx, x));
  WEFT_ASSIGN_OR_RETURN(q, NormHeads(ctx, "q_norm", q));
  WEFT_ASSIGN_OR_RETURN(Tensor k, child("k")->CallForward(ctx, x));
  WEFT_ASSIGN_OR_RETURN(k, NormHeads(ctx, "k_norm", k));
  WEFT_ASSIGN_OR_RETURN(Tensor v, child("v")->CallForward(ctx, x));
  // Column-parallel projections give this rank's heads (and, under sp, the
  // whole sequence): sizes come from their outputs.
  const int64_t d = config_.head_dim, b = q.dim(0), t = q.dim(1);
  const int heads = static_cast<int>(q.dim(2) / d);
  WEFT_ASSIGN_OR_RETURN(const TokenChunks positions, Positions(ctx, t));
  WEFT_ASSIGN_OR_RETURN(Tensor table, rope_->On(ctx));
  WEFT_ASSIGN_OR_RETURN(Tensor qkv, ctx.Empty({b, t, 3 * heads * d}, ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(ctx.ops->RopeQkvForward(ctx.kernel(), qkv, q, k, v, table, positions));
  WEFT_ASSIGN_OR_RETURN(Tensor att, child("core")->CallForward(ctx, qkv));
  return child("proj")->CallForward(ctx, att);
}

absl::StatusOr<Tensor> GroupedQueryAttention::Backward(RunContext& ctx, const Tensor& dy) {
  WEFT_ASSIGN_OR_RETURN(Tensor datt, child("proj")->CallBackward(ctx, dy));
  WEFT_ASSIGN_OR_RETURN(Tensor dqkv, child("core")->CallBackward(ctx, datt));
  const int64_t b = dqkv.dim(0), t = dqkv.dim(1), hd = dqkv.dim(2) / 3;
  // This rank's K/V heads: the query heads' share of the model's groups,
  // or the one head they all read when tp exceeds the K/V heads (each is
  // then replicated on the ranks of its group's query heads).
  const int64_t d = config_.head_dim, group = config_.num_heads / config_.num_kv_heads;
  const int64_t local_heads = hd / d;
  const int64_t kvd = (local_heads >= group ? local_heads / group : 1) * d;
  WEFT_ASSIGN_OR_RETURN(const TokenChunks positions, Positions(ctx, t));
  WEFT_ASSIGN_OR_RETURN(Tensor table, rope_->On(ctx));
  WEFT_ASSIGN_OR_RETURN(Tensor dq, ctx.Empty({b, t, hd}, ctx.compute_dtype));
  WEFT_ASSIGN_OR_RETURN(Tensor dk, ctx.Empty({b, t, kvd}, ctx.compute_dtype));
  WEFT_ASSIGN_OR_RETURN(Tensor dv, ctx.Empty({b, t, kvd}, ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(ctx.ops->RopeQkvBackward(ctx.kernel(), dq, dk, dv, dqkv, table, positions));
  dqkv = Tensor();  // free before the projections' backward
  WEFT_ASSIGN_OR_RETURN(dq, NormHeadsBackward(ctx, "q_norm", dq));
  WEFT_ASSIGN_OR_RETURN(dk, NormHeadsBackward(ctx, "k_norm", dk));
  WEFT_ASSIGN_OR_RETURN(Tensor dx, child("q")->CallBackward(ctx, dq));
  WEFT_ASSIGN_OR_RETURN(Tensor dxk, child("k")->CallBackward(ctx, dk));
  WEFT_RETURN_IF_ERROR(ctx.ops->Add(ctx.kernel(), dx, dx, dxk));
  WEFT_ASSIGN_OR_RETURN(Tensor dxv, child("v")->CallBackward(ctx, dv));
  WEFT_RETURN_IF_ERROR(ctx.ops->Add(ctx.kernel(), dx, dx, dxv));
  return dx;
}

}  // namespace weft
