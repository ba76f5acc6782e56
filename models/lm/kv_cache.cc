#include "models/lm/kv_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/check.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/token_chunks.h"
#include "core/nn/attention_core.h"
#include "core/nn/embedding.h"

namespace weft {
namespace {

// The attention core while a cache stands in. Inside Append it appends the
// new tokens' packed rows at their positions (ctx.sequence) and attends
// over all rows so far with the blockwise kernel's explicit positions;
// outside (a full forward while the cache lives, training) it is the
// model's own core.
class CachedAttention : public Module {
 public:
  CachedAttention(int64_t head_dim, int64_t capacity, Module* original, const bool* appending)
      : Module("CachedAttention"),
        head_dim_(head_dim),
        capacity_(capacity),
        original_(original),
        appending_(appending) {}

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& qkv) override {
    if (!*appending_) return original_->CallForward(ctx, qkv);
    if (!ctx.sequence.has_value() || ctx.sequence->count != 1 || qkv.ndim() != 3 ||
        qkv.dim(0) != 1 || qkv.dim(1) != ctx.sequence->size()) {
      return FailedPrecondition("a cached attention outside KvCache::Append",
                                "one sequence at the positions Append sets");
    }
    const int64_t n = qkv.dim(1), w3 = qkv.dim(2), p0 = ctx.sequence->offsets[0];
    if (!rows_.defined()) {
      WEFT_ASSIGN_OR_RETURN(rows_, ctx.Empty({capacity_, w3}, ctx.compute_dtype));
    }
    WEFT_RETURN_IF_ERROR(rows_.Slice(0, p0, p0 + n).CopyFrom(qkv.View({n, w3}), ctx.stream));
    const Tensor cached = rows_.Slice(0, 0, p0 + n).View({1, p0 + n, w3});
    const int heads = static_cast<int>(w3 / 3 / head_dim_);
    WEFT_ASSIGN_OR_RETURN(Tensor att, ctx.Empty({1, n, w3 / 3}, ctx.compute_dtype));
    WEFT_ASSIGN_OR_RETURN(Tensor lse, ctx.Empty({1, heads, n}, DType::kF32));
    WEFT_RETURN_IF_ERROR(ctx.ops->AttentionBlockForward(
        ctx.kernel(), att, lse, qkv, *ctx.sequence, cached, TokenChunks::Contiguous(p0 + n),
        heads, /*accumulate=*/false));
    return att;
  }
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dout) override {
    if (!*appending_) return original_->CallBackward(ctx, dout);
    return FailedPrecondition("backward through a key/value cache", "decoding only (no training)");
  }

 private:
  const int64_t head_dim_, capacity_;
  Module* const original_;     // owned by the KvCache
  const bool* const appending_;  // the KvCache's: true inside Append
  Tensor rows_;  // (capacity, 3W): each position's packed row
};

// The blocks whose attention mixes tokens elsewhere than in an attention
// core (a strategy swapped it): the cache cannot stand in for them.
std::vector<std::string> BlocksWithoutCore(CausalLm& model) {
  std::vector<std::string> missing;
  for (Module* block : model.blocks()->children()) {
    bool found = false;
    for (Module* m : block->Modules()) found |= dynamic_cast<CausalAttentionCore*>(m) != nullptr;
    if (!found) missing.push_back(absl::StrCat(block->name(), " (", block->type_name(), ")"));
  }
  return missing;
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(CausalLm& model, const RunContext& ctx,
                                                         int64_t capacity) {
  (void)ctx;  // rows are allocated on ctx's device at the first Append
  const int64_t max = model.lm_shape().seq_len;
  if (capacity < 1 || capacity > max) {
    return InvalidArgument(absl::StrCat("a key/value cache of ", capacity, " positions"),
                           absl::StrCat("1 to the model's sequence length ", max));
  }
  const auto unsupported = [](const std::string& what) {
    return FailedPrecondition(
        absl::StrCat("a key/value cache over ", what),
        "the model as built (a whole token embedding, every block's attention through an "
        "attention core)",
        "sample from the whole model, or decode without the cache (--kv_cache=false)");
  };
  if (dynamic_cast<TokenPositionEmbedding*>(model.child("embed")) == nullptr) {
    return unsupported("a vocabulary-parallel embedding");
  }
  if (std::vector<std::string> missing = BlocksWithoutCore(model); !missing.empty()) {
    return unsupported(absl::StrJoin(missing, ", "));
  }
  std::unique_ptr<KvCache> cache(new KvCache(&model, capacity));
  std::vector<std::pair<Module*, std::string>> sites;
  for (Module* m : model.Modules()) {
    for (Module* c : m->children()) {
      if (dynamic_cast<CausalAttentionCore*>(c) != nullptr) sites.push_back({m, c->local_name()});
    }
  }
  for (auto& [parent, name] : sites) {
    auto* core = static_cast<CausalAttentionCore*>(parent->child(name));
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Module> original,
                          parent->ReplaceChild(name, std::make_unique<CachedAttention>(
                                                         core->head_dim(), capacity, core,
                                                         &cache->appending_)));
    cache->sites_.push_back({parent, name, std::move(original)});
  }
  return cache;
}

KvCache::~KvCache() {
  for (Site& s : sites_) WEFT_CHECK_OK(s.parent->ReplaceChild(s.name, std::move(s.original)).status());
}

absl::StatusOr<Tensor> KvCache::Append(RunContext ctx, absl::Span<const int32_t> tokens) {
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
  // The embedding's position rows and the rotary angles read these.
  SequenceScope at_positions(ctx, TokenChunks::Contiguous(n, p0));
  appending_ = true;
  absl::StatusOr<Tensor> all = model_->Forward(ctx, ids);  // (n, padded vocab)
  appending_ = false;
  WEFT_ASSIGN_OR_RETURN(Tensor logits, std::move(all));
  size_ = p0 + n;
  return logits.Slice(0, n - 1, n);
}

}  // namespace weft
