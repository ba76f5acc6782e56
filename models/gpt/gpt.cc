#include "models/gpt/gpt.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/base/check.h"
#include "core/nn/layer_norm.h"
#include "core/nn/lm_head.h"
#include "core/nn/loss.h"
#include "core/nn/moe.h"
#include "core/nn/transformer_block.h"

namespace weft {

MoeConfig MoeBlockConfig(const GptConfig& c) {
  const double ratio = c.expert_mlp_ratio() > 0
                           ? c.expert_mlp_ratio()
                           : static_cast<double>(c.mlp_ratio()) / std::max(1, c.top_k());
  return {.channels = c.d_model(),
          .hidden = std::max<int64_t>(1, static_cast<int64_t>(ratio * c.d_model())),
          .num_experts = c.num_experts(),
          .top_k = c.top_k(),
          .capacity_factor = c.capacity_factor(),
          .aux_loss_coef = c.moe_aux_loss_coef(),
          .z_loss_coef = c.moe_z_loss_coef(),
          .routing_groups = c.moe_routing_groups(),
          .init_std = c.init_std(),
          .proj_init_std = c.init_std() / std::sqrt(2.0f * static_cast<float>(c.n_layer()))};
}

absl::StatusOr<std::unique_ptr<Gpt>> Gpt::Create(const GptConfig& c, int64_t seq_len) {
  if (c.n_layer() < 1 || c.n_head() < 1 || c.d_model() < 1) {
    return InvalidArgument(absl::StrCat("n_layer=", c.n_layer(), " n_head=", c.n_head(),
                                        " d_model=", c.d_model()),
                           "all >= 1");
  }
  if (c.d_model() % c.n_head() != 0) {
    return InvalidArgument(
        absl::StrCat("n_head=", c.n_head(), " does not divide d_model=", c.d_model()),
        "d_model a multiple of n_head", "e.g. d_model=768 with n_head=12 (head size 64)");
  }
  if (c.vocab_size() < 1) {
    return InvalidArgument(absl::StrCat("vocab_size=", c.vocab_size()), "a vocabulary >= 1",
                           "leave vocab_size at 0 to take the tokenizer's size");
  }
  if (c.vocab_pad_multiple() < 1) {
    return InvalidArgument(absl::StrCat("vocab_pad_multiple=", c.vocab_pad_multiple()), ">= 1");
  }
  // 0 sized the MLP empty and crashed a kernel with SIGFPE.
  if (c.mlp_ratio() < 1) {
    return InvalidArgument(absl::StrCat("--mlp_ratio=", c.mlp_ratio()),
                           "an MLP hidden size of mlp_ratio x d_model with mlp_ratio >= 1",
                           "GPT-2 uses 4");
  }
  if (seq_len < 1 || seq_len > c.max_seq_len()) {
    return InvalidArgument(absl::StrCat("seq_len=", seq_len, " with max_seq_len=", c.max_seq_len()),
                           "1 <= seq_len <= max_seq_len", "lower --seq_len or raise --max_seq_len");
  }
  if (c.dropout() < 0 || c.dropout() >= 1) {
    return InvalidArgument(absl::StrCat("dropout=", c.dropout()), "0 <= dropout < 1");
  }
  if (c.moe_every() < 0) {
    return InvalidArgument(absl::StrCat("moe_every=", c.moe_every()),
                           "0 (dense) or k >= 1 (every k-th block is a mixture of experts)");
  }
  if (c.moe_every() > 0) {
    WEFT_RETURN_IF_ERROR(Annotate(ValidateMoeConfig(MoeBlockConfig(c)), "GPT mixture of experts"));
  }
  const int64_t m = c.vocab_pad_multiple();
  const int64_t padded = (c.vocab_size() + m - 1) / m * m;
  return std::unique_ptr<Gpt>(new Gpt(c, seq_len, padded));
}

Gpt::Gpt(const GptConfig& c, int64_t seq_len, int64_t padded_vocab)
    : CausalLm("Gpt", {.seq_len = seq_len,
                       .channels = c.d_model(),
                       .vocab_size = c.vocab_size(),
                       .n_layer = c.n_layer(),
                       .attention_width = c.d_model(),
                       .expert_fraction = static_cast<double>(c.top_k()) / c.num_experts()}),
      config_(c),
      seq_len_(seq_len),
      padded_vocab_(padded_vocab) {
  const float proj_std = c.init_std() / std::sqrt(2.0f * static_cast<float>(c.n_layer()));
  // embed, lm_head and loss are reached through child(): tp swaps them for
  // vocab-parallel versions.
  auto* embed = RegisterSwappableModule(
      "embed", std::make_unique<TokenPositionEmbedding>(padded_vocab, c.max_seq_len(),
                                                        c.d_model(), c.init_std()));
  Sequential* blocks = RegisterModule("blocks", std::make_unique<Sequential>());
  TransformerBlockConfig bc{.channels = c.d_model(),
                            .num_heads = c.n_head(),
                            .mlp_hidden = int64_t{c.mlp_ratio()} * c.d_model(),
                            .init_std = c.init_std(),
                            .proj_init_std = proj_std,
                            .dropout = c.dropout()};
  for (int i = 0; i < c.n_layer(); ++i) {
    auto block = std::make_unique<TransformerBlock>(bc);
    if (c.moe_every() > 0 && (i + 1) % c.moe_every() == 0) {
      // The MLP is swappable by design; Create validated the MoE config.
      WEFT_CHECK_OK(block->ReplaceChild("mlp", std::make_unique<MoeLayer>(MoeBlockConfig(c))).status());
    }
    blocks->Append(std::move(block));
  }
  RegisterModule("ln_f", std::make_unique<LayerNorm>(c.d_model()));
  if (c.tie_weights()) {
    RegisterSwappableModule("lm_head", std::make_unique<LmHead>(embed->wte()));
  } else {
    RegisterSwappableModule("lm_head",
                            std::make_unique<LmHead>(padded_vocab, c.d_model(), c.init_std()));
  }
  RegisterSwappableModule("loss", std::make_unique<CrossEntropyLoss>(c.vocab_size()));
}

TensorParallelPlan Gpt::ParallelPlan() const {
  // Megatron's split: q, k, v and fc by output features (whole heads per
  // rank), the projections by input features, the vocabulary in the
  // embedding, head and loss; norms and residual dropouts run on sequence
  // shards under sequence parallelism.
  TensorParallelPlan plan = {
      {"embed", TpStyle::kVocab},
      {"blocks.*.attn.qkv", TpStyle::kColwise, /*packed=*/3, /*heads=*/config_.n_head()},
      {"blocks.*.attn.proj", TpStyle::kRowwise},
      {"lm_head", TpStyle::kVocab},
      {"loss", TpStyle::kVocab},
      {"blocks.*.ln1", TpStyle::kSequence},
      {"blocks.*.ln2", TpStyle::kSequence},
      {"blocks.*.attn.dropout", TpStyle::kSequence},
      {"ln_f", TpStyle::kSequence},
  };
  const int every = config_.moe_every();
  if (every != 1) {  // some blocks keep a dense MLP (block 0 at least)
    plan.push_back({"blocks.*.mlp.fc", TpStyle::kColwise});
    plan.push_back({"blocks.*.mlp.proj", TpStyle::kRowwise});
    plan.push_back({"blocks.*.mlp.dropout", TpStyle::kSequence});
  }
  // MoE blocks: the router replicated (every tp rank routes the same
  // tokens), each expert's hidden units split over tp (Megatron's expert
  // tensor parallelism; core/nn/expert_mlps.h).
  if (every > 0 && config_.n_layer() >= every) {
    plan.push_back({"blocks.*.mlp.experts", TpStyle::kExperts});
  }
  return plan;
}

absl::StatusOr<std::unique_ptr<Model>> Gpt::CloneArchitecture() const {
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Gpt> copy, Create(config_, seq_len_));
  return std::unique_ptr<Model>(std::move(copy));
}

std::string Gpt::Summary() const {
  std::string moe;
  if (config_.moe_every() > 0) {
    moe = absl::StrFormat(" MoE every %d: %d experts top-%d%s", config_.moe_every(),
                          config_.num_experts(), config_.top_k(),
                          config_.capacity_factor() > 0
                              ? absl::StrFormat(" capacity %.2f", config_.capacity_factor())
                              : " dropless");
  }
  return absl::StrFormat("GPT %dL %dH %dd vocab %d (padded %d) T %d%s%s", config_.n_layer(),
                         config_.n_head(), config_.d_model(), config_.vocab_size(), padded_vocab_,
                         seq_len_, config_.tie_weights() ? " tied" : "", moe);
}

}  // namespace weft
