#include "models/gpt/gpt.h"

#include <cmath>
#include <vector>

#include "absl/types/span.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/base/check.h"
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
    : Model("Gpt"), config_(c), seq_len_(seq_len), padded_vocab_(padded_vocab) {
  const float proj_std = c.init_std() / std::sqrt(2.0f * static_cast<float>(c.n_layer()));
  // embed, lm_head and loss are reached through child(): tp swaps them for
  // vocab-parallel versions.
  auto* embed = RegisterSwappableModule(
      "embed", std::make_unique<TokenPositionEmbedding>(padded_vocab, c.max_seq_len(),
                                                        c.d_model(), c.init_std()));
  blocks_ = RegisterModule("blocks", std::make_unique<Sequential>());
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
    blocks_->Append(std::move(block));
  }
  ln_f_ = RegisterModule("ln_f", std::make_unique<LayerNorm>(c.d_model()));
  if (c.tie_weights()) {
    RegisterSwappableModule("lm_head", std::make_unique<LmHead>(embed->wte()));
  } else {
    RegisterSwappableModule("lm_head",
                            std::make_unique<LmHead>(padded_vocab, c.d_model(), c.init_std()));
  }
  RegisterSwappableModule("loss", std::make_unique<CrossEntropyLoss>(c.vocab_size()));
}

std::vector<Stage> Gpt::Stages() {
  std::vector<Stage> stages;
  stages.push_back({.name = "embed", .modules = {child("embed")}});
  for (Module* block : blocks_->children()) {
    stages.push_back({.name = block->name(), .modules = {block}});
  }
  stages.push_back({.name = "head",
                    .modules = {ln_f_, child("lm_head")},
                    .loss = dynamic_cast<LossModule*>(child("loss"))});
  return stages;
}

absl::StatusOr<StageTensor> Gpt::StageInput(const RunContext& ctx, const StageBatch& part,
                                             int stage) const {
  // Every stage after the embedding takes the residual stream.
  const int stages = config_.n_layer() + 2;
  if (stage < 1 || stage >= stages || part.inputs.ndim() != 2) {
    return InvalidArgument(absl::StrCat("the input of stage ", stage, " for inputs ",
                                        part.inputs.DebugString()),
                           absl::StrCat("a stage in [1, ", stages, ") and (B, T) inputs"));
  }
  return StageTensor{{part.inputs.dim(0), part.inputs.dim(1), config_.d_model()},
                     ctx.compute_dtype};
}

TensorParallelPlan Gpt::ParallelPlan() const {
  // Megatron's split: q, k, v and fc by output features (whole heads per
  // rank), the projections by input features, the vocabulary in the
  // embedding, head and loss; norms and residual dropouts run on sequence
  // shards under sequence parallelism.
  TensorParallelPlan plan = {
      {"embed", TpStyle::kVocab},
      {"blocks.*.attn.qkv", TpStyle::kColwise, /*packed=*/3},
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

absl::StatusOr<Tensor> Gpt::ForwardLoss(RunContext& ctx, const Tensor& inputs,
                                        const Tensor& targets, float dloss_scale) {
  if (inputs.shape() != targets.shape() || inputs.ndim() != 2) {
    return InvalidArgument("inputs " + ShapeString(inputs.shape()) + " and targets " +
                               ShapeString(targets.shape()),
                           "equal shapes (B, T)");
  }
  return Model::ForwardLoss(ctx, inputs, targets, dloss_scale);
}

double Gpt::TrainingFlopsPerTarget() const {
  double n = 0;
  for (Parameter* p : const_cast<Gpt*>(this)->Parameters()) {
    // A token uses top_k of the num_experts experts.
    const bool expert = p->name().find(".experts.") != std::string::npos;
    n += static_cast<double>(p->global_numel()) *
         (expert ? static_cast<double>(config_.top_k()) / config_.num_experts() : 1.0);
  }
  // 6N for the matmuls with weights (forward + backward), plus attention's
  // scores and weighted sum: 6 * L * T * d with causal masking.
  return 6.0 * n + 6.0 * config_.n_layer() * static_cast<double>(seq_len_) * config_.d_model();
}

absl::StatusOr<std::unique_ptr<Model>> Gpt::CloneArchitecture() const {
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Gpt> copy, Create(config_, seq_len_));
  return std::unique_ptr<Model>(std::move(copy));
}

absl::StatusOr<std::pair<Tensor, Tensor>> Gpt::ProbeInputs(const RunContext& ctx) const {
  std::vector<int32_t> tokens(seq_len_ + 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 7 + 3) % config_.vocab_size());
  }
  WEFT_ASSIGN_OR_RETURN(
      Tensor x, Tensor::FromVector<int32_t>(absl::MakeConstSpan(tokens.data(), seq_len_), {1, seq_len_}));
  WEFT_ASSIGN_OR_RETURN(
      Tensor y, Tensor::FromVector<int32_t>(absl::MakeConstSpan(tokens.data() + 1, seq_len_), {1, seq_len_}));
  WEFT_ASSIGN_OR_RETURN(x, x.To(ctx.device, ctx.stream));
  WEFT_ASSIGN_OR_RETURN(y, y.To(ctx.device, ctx.stream));
  return std::make_pair(std::move(x), std::move(y));
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
