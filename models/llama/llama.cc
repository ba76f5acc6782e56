#include "models/llama/llama.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/embedding.h"
#include "core/nn/gqa_attention.h"
#include "core/nn/layer_norm.h"
#include "core/nn/lm_head.h"
#include "core/nn/loss.h"
#include "core/nn/moe.h"
#include "core/nn/swiglu_mlp.h"
#include "core/nn/transformer_block.h"

namespace weft {
namespace {

RopeConfig RopeOf(const LlamaConfig& c) {
  RopeConfig r{.head_dim = LlamaHeadDim(c), .max_positions = c.max_seq_len(),
               .theta = c.rope_theta()};
  if (c.has_rope_scaling()) {
    const RopeScalingConfig& s = c.rope_scaling();
    r.scaling = {.factor = s.factor(),
                 .low_freq_factor = s.low_freq_factor(),
                 .high_freq_factor = s.high_freq_factor(),
                 .original_max_positions = s.original_max_position_embeddings()};
  }
  return r;
}

absl::Status CheckRopeScaling(const LlamaConfig& c) {
  if (!c.has_rope_scaling()) return absl::OkStatus();
  const RopeScalingConfig& s = c.rope_scaling();
  if (s.rope_type() != "llama3") {
    return InvalidArgument(absl::StrCat("rope_scaling.rope_type=\"", s.rope_type(), "\""),
                           "\"llama3\" (Llama 3.1's frequency scaling)",
                           "drop rope_scaling for unscaled rotary embeddings");
  }
  // Each field by name: RopeTable sees 0 for a missing one.
  const auto missing = [](const char* field) {
    return InvalidArgument(absl::StrCat("rope_scaling without ", field),
                           "factor, low_freq_factor, high_freq_factor and "
                           "original_max_position_embeddings, all > 0",
                           "copy the rope_scaling block of the model's config.json whole");
  };
  if (!s.has_factor()) return missing("factor");
  if (!s.has_low_freq_factor()) return missing("low_freq_factor");
  if (!s.has_high_freq_factor()) return missing("high_freq_factor");
  if (!s.has_original_max_position_embeddings()) {
    return missing("original_max_position_embeddings");
  }
  return absl::OkStatus();
}

}  // namespace

bool LlamaIsMoe(const LlamaConfig& c) { return c.num_experts() > 0; }

MoeConfig LlamaMoeConfig(const LlamaConfig& c) {
  const float proj_std = c.init_std() / std::sqrt(2.0f * static_cast<float>(c.n_layer()));
  return {.channels = c.d_model(),
          .hidden = c.moe_ffn_hidden() > 0 ? c.moe_ffn_hidden() : LlamaFfnHidden(c),
          .num_experts = c.num_experts(),
          .top_k = c.top_k(),
          .expert_activation = ExpertActivation::kSwiGlu,
          .router_score =
              c.router_score() == "sigmoid" ? RouterScore::kSigmoid : RouterScore::kSoftmax,
          .normalize_gates = c.norm_topk_prob(),
          .shared_hidden = c.shared_expert_hidden(),
          .capacity_factor = c.capacity_factor(),
          .aux_loss_coef = c.moe_aux_loss_coef(),
          .z_loss_coef = c.moe_z_loss_coef(),
          .routing_groups = c.moe_routing_groups(),
          .init_std = c.init_std(),
          .proj_init_std = proj_std};
}

int64_t LlamaFfnHidden(const LlamaConfig& c) {
  if (c.ffn_hidden() > 0) return c.ffn_hidden();
  // Meta's rule (llama/model.py): two thirds of 4d, scaled, rounded up.
  int64_t hidden = 2 * (4 * int64_t{c.d_model()}) / 3;
  if (c.ffn_dim_multiplier() > 0) {
    hidden = static_cast<int64_t>(static_cast<double>(c.ffn_dim_multiplier()) * hidden);
  }
  const int64_t m = std::max(1, c.multiple_of());
  return (hidden + m - 1) / m * m;
}

int LlamaKvHeads(const LlamaConfig& c) { return c.n_kv_head() > 0 ? c.n_kv_head() : c.n_head(); }

int64_t LlamaHeadDim(const LlamaConfig& c) {
  if (c.head_dim() > 0) return c.head_dim();
  return c.n_head() > 0 ? c.d_model() / c.n_head() : 0;
}

absl::StatusOr<std::unique_ptr<Llama>> Llama::Create(const LlamaConfig& c, int64_t seq_len) {
  if (c.n_layer() < 1 || c.n_head() < 1 || c.d_model() < 1 || c.n_kv_head() < 0) {
    return InvalidArgument(absl::StrCat("n_layer=", c.n_layer(), " n_head=", c.n_head(),
                                        " d_model=", c.d_model(), " n_kv_head=", c.n_kv_head()),
                           "n_layer, n_head, d_model >= 1 and n_kv_head >= 0 (0: n_head)");
  }
  if (c.head_dim() == 0 && c.d_model() % c.n_head() != 0) {
    return InvalidArgument(
        absl::StrCat("n_head=", c.n_head(), " does not divide d_model=", c.d_model()),
        "d_model a multiple of n_head, or head_dim given",
        "e.g. d_model=2048 with n_head=32 (head size 64)");
  }
  const int kv = LlamaKvHeads(c);
  if (c.n_head() % kv != 0) {
    return InvalidArgument(
        absl::StrCat("n_head=", c.n_head(), " is not divisible by n_kv_head=", kv),
        "n_kv_head dividing n_head: each K/V head serves n_head / n_kv_head query heads",
        absl::StrCat("e.g. n_kv_head=", c.n_head() % 8 == 0 ? 8 : 1, " for n_head=", c.n_head()));
  }
  if (LlamaHeadDim(c) % 2 != 0) {
    return InvalidArgument(absl::StrCat("head size ", LlamaHeadDim(c)),
                           "an even head size (rotary embeddings rotate pairs)");
  }
  if (c.vocab_size() < 1) {
    return InvalidArgument(absl::StrCat("vocab_size=", c.vocab_size()), "a vocabulary >= 1",
                           "leave vocab_size at 0 to take the tokenizer's size");
  }
  if (c.vocab_pad_multiple() < 1) {
    return InvalidArgument(absl::StrCat("vocab_pad_multiple=", c.vocab_pad_multiple()), ">= 1");
  }
  if (seq_len < 1 || seq_len > c.max_seq_len()) {
    return InvalidArgument(
        absl::StrCat("seq_len=", seq_len, " with max_seq_len=", c.max_seq_len()),
        "1 <= seq_len <= max_seq_len: the rotary table has max_seq_len positions",
        "lower --seq_len or raise --max_seq_len (Llama 3.1 extends its 8192 positions with "
        "rope_scaling)");
  }
  if (c.ffn_hidden() < 0 || c.multiple_of() < 1 || c.ffn_dim_multiplier() < 0) {
    return InvalidArgument(absl::StrCat("ffn_hidden=", c.ffn_hidden(), " multiple_of=",
                                        c.multiple_of(), " ffn_dim_multiplier=",
                                        c.ffn_dim_multiplier()),
                           "ffn_hidden >= 0 (0: Meta's rule), multiple_of >= 1, "
                           "ffn_dim_multiplier >= 0");
  }
  if (!(c.norm_eps() > 0)) {
    return InvalidArgument(absl::StrCat("norm_eps=", c.norm_eps()), "norm_eps > 0");
  }
  WEFT_RETURN_IF_ERROR(CheckRopeScaling(c));
  if (c.num_experts() < 0 || c.moe_ffn_hidden() < 0 || c.shared_expert_hidden() < 0) {
    return InvalidArgument(absl::StrCat("num_experts=", c.num_experts(), " moe_ffn_hidden=",
                                        c.moe_ffn_hidden(), " shared_expert_hidden=",
                                        c.shared_expert_hidden()),
                           "all >= 0 (num_experts 0: a dense model)");
  }
  if (LlamaIsMoe(c)) {
    if (c.router_score() != "softmax" && c.router_score() != "sigmoid") {
      return InvalidArgument(absl::StrCat("router_score=\"", c.router_score(), "\""),
                             "\"softmax\" (Mixtral, Qwen3-MoE) or \"sigmoid\" (DeepSeek-V3)");
    }
    WEFT_RETURN_IF_ERROR(Annotate(ValidateMoeConfig(LlamaMoeConfig(c)), "Llama mixture of experts"));
  }
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<RopeTable> rope, RopeTable::Create(RopeOf(c)));
  const int64_t m = c.vocab_pad_multiple();
  const int64_t padded = (c.vocab_size() + m - 1) / m * m;
  return std::unique_ptr<Llama>(new Llama(c, seq_len, padded, std::move(rope)));
}

Llama::Llama(const LlamaConfig& c, int64_t seq_len, int64_t padded_vocab,
             std::shared_ptr<RopeTable> rope)
    : CausalLm("Llama", {.seq_len = seq_len,
                         .channels = c.d_model(),
                         .vocab_size = c.vocab_size(),
                         .n_layer = c.n_layer(),
                         .attention_width = c.n_head() * LlamaHeadDim(c),
                         .expert_fraction = LlamaIsMoe(c) ? static_cast<double>(c.top_k()) /
                                                                c.num_experts()
                                                          : 1.0}),
      config_(c),
      seq_len_(seq_len),
      padded_vocab_(padded_vocab) {
  const float proj_std = c.init_std() / std::sqrt(2.0f * static_cast<float>(c.n_layer()));
  // No position table: positions enter through the rotary embeddings.
  auto* embed = RegisterSwappableModule(
      "embed", std::make_unique<TokenPositionEmbedding>(padded_vocab, /*max_positions=*/0,
                                                        c.d_model(), c.init_std()));
  Sequential* blocks = RegisterModule("blocks", std::make_unique<Sequential>());
  const GqaAttentionConfig attn{.channels = c.d_model(),
                                .num_heads = c.n_head(),
                                .num_kv_heads = LlamaKvHeads(c),
                                .head_dim = LlamaHeadDim(c),
                                .init_std = c.init_std(),
                                .proj_init_std = proj_std,
                                .qk_norm = c.qk_norm(),
                                .norm_eps = c.norm_eps()};
  const int64_t hidden = LlamaFfnHidden(c);
  for (int i = 0; i < c.n_layer(); ++i) {
    std::unique_ptr<Module> mlp;
    if (LlamaIsMoe(c)) {
      mlp = std::make_unique<MoeLayer>(LlamaMoeConfig(c));  // Create validated it
    } else {
      mlp = std::make_unique<SwiGluMlp>(c.d_model(), hidden, c.init_std(), proj_std);
    }
    blocks->Append(std::make_unique<TransformerBlock>(
        std::make_unique<LayerNorm>(c.d_model(), c.norm_eps(), NormKind::kRms),
        std::make_unique<GroupedQueryAttention>(attn, rope),
        std::make_unique<LayerNorm>(c.d_model(), c.norm_eps(), NormKind::kRms),
        std::move(mlp)));
  }
  RegisterModule("ln_f", std::make_unique<LayerNorm>(c.d_model(), c.norm_eps(), NormKind::kRms));
  if (c.tie_weights()) {
    RegisterSwappableModule("lm_head", std::make_unique<LmHead>(embed->wte()));
  } else {
    RegisterSwappableModule("lm_head",
                            std::make_unique<LmHead>(padded_vocab, c.d_model(), c.init_std()));
  }
  RegisterSwappableModule("loss", std::make_unique<CrossEntropyLoss>(c.vocab_size()));
}

TensorParallelPlan Llama::ParallelPlan() const {
  const int kv = LlamaKvHeads(config_);
  TensorParallelPlan plan = {
      {"embed", TpStyle::kVocab},
      {"blocks.*.attn.q", TpStyle::kColwise, 1, config_.n_head()},
      // K/V heads fewer than tp: each replicated on the ranks its query
      // heads sit on (tp a multiple of n_kv_head).
      {"blocks.*.attn.k", TpStyle::kColwise, 1, kv, "n_kv_head", /*replicate_heads=*/true},
      {"blocks.*.attn.v", TpStyle::kColwise, 1, kv, "n_kv_head", /*replicate_heads=*/true},
      {"blocks.*.attn.proj", TpStyle::kRowwise},
      {"lm_head", TpStyle::kVocab},
      {"loss", TpStyle::kVocab},
      {"blocks.*.ln1", TpStyle::kSequence},
      {"blocks.*.ln2", TpStyle::kSequence},
      {"ln_f", TpStyle::kSequence},
  };
  if (LlamaIsMoe(config_)) {
    // Every expert's hidden units split over tp (Megatron's expert tensor
    // parallelism); the router and a shared expert stay replicated.
    plan.push_back({"blocks.*.mlp.experts", TpStyle::kExperts});
  } else {
    plan.push_back({"blocks.*.mlp.gate_up", TpStyle::kColwise, /*packed=*/2});
    plan.push_back({"blocks.*.mlp.down", TpStyle::kRowwise});
  }
  if (config_.qk_norm()) {
    plan.push_back({"blocks.*.attn.q_norm", TpStyle::kHeadShare});
    plan.push_back({"blocks.*.attn.k_norm", TpStyle::kHeadShare});
  }
  return plan;
}

absl::StatusOr<std::unique_ptr<Model>> Llama::CloneArchitecture() const {
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Llama> copy, Create(config_, seq_len_));
  return std::unique_ptr<Model>(std::move(copy));
}

std::string Llama::Summary() const {
  const int kv = LlamaKvHeads(config_);
  std::string moe;
  if (LlamaIsMoe(config_)) {
    const MoeConfig m = LlamaMoeConfig(config_);
    moe = absl::StrFormat(" MoE %d experts of %d top-%d %s%s%s", m.num_experts, m.hidden,
                          m.top_k, config_.router_score(),
                          config_.norm_topk_prob() ? " renormalised" : "",
                          m.shared_hidden > 0 ? absl::StrCat(" shared ", m.shared_hidden) : "");
  }
  return absl::StrFormat("Llama %dL %dH (%d KV) %dd ffn %d vocab %d (padded %d) T %d%s%s%s",
                         config_.n_layer(), config_.n_head(), kv, config_.d_model(),
                         LlamaFfnHidden(config_), config_.vocab_size(), padded_vocab_, seq_len_,
                         config_.tie_weights() ? " tied" : "", config_.qk_norm() ? " qk-norm" : "",
                         moe);
}

}  // namespace weft
