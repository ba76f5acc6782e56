#include "models/gpt/kv_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/token_chunks.h"
#include "core/nn/attention.h"
#include "core/nn/recompute.h"
#include "core/nn/transformer_block.h"

namespace weft {

namespace {

// The module a Recompute wrapper stands for (recompute only changes what a
// training forward keeps; decoding keeps nothing anyway).
Module* Unwrapped(Module* m) {
  while (auto* r = dynamic_cast<Recompute*>(m)) m = r->inner();
  return m;
}

}  // namespace

absl::StatusOr<GptKvCache> GptKvCache::Create(Gpt& model, const RunContext& ctx,
                                              int64_t capacity) {
  const GptConfig& config = model.config();
  if (capacity < 1 || capacity > config.max_seq_len()) {
    return InvalidArgument(absl::StrCat("a key/value cache of ", capacity, " positions"),
                           absl::StrCat("1 to the model's max_seq_len=", config.max_seq_len()));
  }
  const auto unsupported = [](const std::string& what) {
    return FailedPrecondition(
        absl::StrCat("a key/value cache over ", what),
        "the GPT as built (token-position embedding, plain attention in every block)",
        "sample from the whole model (//models/gpt:sample reads any checkpoint whole), or "
        "decode without the cache (--kv_cache=false)");
  };
  if (model.embed() == nullptr) return unsupported("a vocabulary-parallel embedding");
  std::vector<Layer> layers;
  const int64_t c = config.d_model();
  for (Module* m : model.blocks()->children()) {
    auto* block = dynamic_cast<TransformerBlock*>(Unwrapped(m));
    auto* attn =
        block == nullptr ? nullptr : dynamic_cast<CausalSelfAttention*>(Unwrapped(block->child("attn")));
    if (attn == nullptr) return unsupported(absl::StrCat(m->name(), " (", m->type_name(), ")"));
    WEFT_ASSIGN_OR_RETURN(Tensor rows, ctx.Empty({capacity, 3 * c}, ctx.compute_dtype));
    layers.push_back({.ln1 = block->ln1(),
                      .qkv = attn->child("qkv"),
                      .proj = attn->child("proj"),
                      .dropout = attn->child("dropout"),
                      .ln2 = block->ln2(),
                      .mlp = block->child("mlp"),
                      .heads = attn->num_heads(),
                      .rows = std::move(rows)});
  }
  return GptKvCache(&model, std::move(layers), capacity);
}

absl::StatusOr<Tensor> GptKvCache::Append(RunContext ctx, absl::Span<const int32_t> tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t p0 = size_;
  if (n < 1 || p0 + n > capacity_) {
    return InvalidArgument(absl::StrCat(n, " new tokens after ", p0, " cached"),
                           absl::StrCat("1 to ", capacity_ - p0, " (the cache holds ", capacity_,
                                        " positions)"),
                           "Clear() the cache and start the window again");
  }
  ctx.training = false;
  WEFT_ASSIGN_OR_RETURN(Tensor ids, Tensor::FromVector<int32_t>(tokens, {1, n}));
  WEFT_ASSIGN_OR_RETURN(ids, ids.To(ctx.device, ctx.stream));
  const TokenChunks queries = TokenChunks::Contiguous(n, p0);
  Tensor x;
  {
    // The embedding adds the position rows [p0, p0 + n).
    SequenceScope at_positions(ctx, queries);
    WEFT_ASSIGN_OR_RETURN(x, model_->child("embed")->CallForward(ctx, ids));
  }
  const TokenChunks keys = TokenChunks::Contiguous(p0 + n);
  for (Layer& layer : layers_) {
    // TransformerBlock::Forward with the attention over cached rows.
    WEFT_ASSIGN_OR_RETURN(Tensor h, layer.ln1->CallForward(ctx, x));
    WEFT_ASSIGN_OR_RETURN(Tensor qkv, layer.qkv->CallForward(ctx, h));  // (1, n, 3C)
    const int64_t c3 = qkv.dim(2);
    WEFT_RETURN_IF_ERROR(
        layer.rows.Slice(0, p0, p0 + n).CopyFrom(qkv.View({n, c3}), ctx.stream));
    const Tensor cached = layer.rows.Slice(0, 0, p0 + n).View({1, p0 + n, c3});
    WEFT_ASSIGN_OR_RETURN(Tensor att, ctx.Empty({1, n, c3 / 3}, ctx.compute_dtype));
    WEFT_ASSIGN_OR_RETURN(Tensor lse, ctx.Empty({1, layer.heads, n}, DType::kF32));
    WEFT_RETURN_IF_ERROR(ctx.ops->AttentionBlockForward(ctx.kernel(), att, lse, qkv, queries,
                                                        cached, keys, layer.heads,
                                                        /*accumulate=*/false));
    WEFT_ASSIGN_OR_RETURN(Tensor a, layer.proj->CallForward(ctx, att));
    WEFT_ASSIGN_OR_RETURN(a, layer.dropout->CallForward(ctx, a));
    WEFT_ASSIGN_OR_RETURN(auto residual_and_normed, layer.ln2->ForwardResidual(ctx, x, a));
    WEFT_ASSIGN_OR_RETURN(Tensor m, layer.mlp->CallForward(ctx, residual_and_normed.second));
    WEFT_ASSIGN_OR_RETURN(x, ctx.Empty(m.shape(), ctx.compute_dtype));
    WEFT_RETURN_IF_ERROR(ctx.ops->Add(ctx.kernel(), x, residual_and_normed.first, m));
  }
  size_ = p0 + n;
  // Only the last position's logits are needed: the head runs on one row.
  const int64_t c = x.dim(2);
  Tensor last = x.View({n, c}).Slice(0, n - 1, n).View({1, 1, c});
  WEFT_ASSIGN_OR_RETURN(Tensor h, model_->child("ln_f")->CallForward(ctx, last));
  return model_->child("lm_head")->CallForward(ctx, h);
}

}  // namespace weft
