#include "core/nn/transformer_block.h"

#include "core/base/status_macros.h"

namespace weft {

TransformerBlock::TransformerBlock(const TransformerBlockConfig& c)
    : TransformerBlock(std::make_unique<LayerNorm>(c.channels, c.ln_eps),
                       std::make_unique<CausalSelfAttention>(c.channels, c.num_heads, c.init_std,
                                                             c.proj_init_std, c.dropout),
                       std::make_unique<LayerNorm>(c.channels, c.ln_eps),
                       std::make_unique<Mlp>(c.channels, c.mlp_hidden, c.init_std,
                                             c.proj_init_std, c.dropout)) {}

TransformerBlock::TransformerBlock(std::unique_ptr<LayerNorm> ln1, std::unique_ptr<Module> attn,
                                   std::unique_ptr<LayerNorm> ln2, std::unique_ptr<Module> mlp)
    : Module("TransformerBlock") {
  // attn and mlp are called only through Module, so tp can swap them for
  // parallel versions and recompute can wrap them; ln1/ln2 are used through
  // LayerNorm's residual entry points and stay pinned.
  ln1_ = RegisterModule("ln1", std::move(ln1));
  RegisterSwappableModule("attn", std::move(attn));
  ln2_ = RegisterModule("ln2", std::move(ln2));
  RegisterSwappableModule("mlp", std::move(mlp));
}

absl::StatusOr<Tensor> TransformerBlock::Forward(RunContext& ctx, const Tensor& x) {
  WEFT_ASSIGN_OR_RETURN(Tensor h, ln1_->CallForward(ctx, x));
  WEFT_ASSIGN_OR_RETURN(Tensor a, child("attn")->CallForward(ctx, h));
  WEFT_ASSIGN_OR_RETURN(auto residual_and_normed, ln2_->ForwardResidual(ctx, x, a));
  Tensor& r = residual_and_normed.first;
  WEFT_ASSIGN_OR_RETURN(Tensor m, child("mlp")->CallForward(ctx, residual_and_normed.second));
  WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.Empty(r.shape(), ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(ctx.ops->Add(ctx.kernel(), out, r, m));
  return out;
}

absl::StatusOr<Tensor> TransformerBlock::Backward(RunContext& ctx, const Tensor& dy) {
  // d(out)/d(r) is identity, and r feeds ln2 as well: dr = dy + ln2'(mlp'(dy)).
  WEFT_ASSIGN_OR_RETURN(Tensor dm, child("mlp")->CallBackward(ctx, dy));
  // dy is the caller's: ln2 reads it as the residual and writes a new dr.
  WEFT_ASSIGN_OR_RETURN(Tensor dr, ln2_->BackwardResidual(ctx, dm, dy));
  // r = x + a: both get dr; x also feeds ln1, and dr is ours to add onto.
  WEFT_ASSIGN_OR_RETURN(Tensor dh, child("attn")->CallBackward(ctx, dr));
  WEFT_RETURN_IF_ERROR(ln1_->BackwardAccumulate(ctx, dh, dr));
  return dr;
}

}  // namespace weft
