#include "strategies/tp/tp.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/dropout.h"
#include "core/nn/embedding.h"
#include "core/nn/expert_mlps.h"
#include "core/nn/layer_norm.h"
#include "core/nn/linear.h"
#include "core/nn/lm_head.h"
#include "core/nn/loss.h"
#include "strategies/tp/adopt_values.h"
#include "strategies/tp/parallel_experts.h"
#include "strategies/tp/parallel_linear.h"
#include "strategies/tp/region_ops.h"
#include "strategies/tp/replicated_head_grads.h"
#include "strategies/tp/sequence_gathered.h"
#include "strategies/tp/sequence_grads.h"
#include "strategies/tp/tp_comm.h"
#include "strategies/tp/vocab_parallel.h"

namespace weft {
namespace {

using tp::TpComm;

const char* StyleName(TpStyle s) {
  switch (s) {
    case TpStyle::kColwise: return "colwise";
    case TpStyle::kRowwise: return "rowwise";
    case TpStyle::kVocab: return "vocab";
    case TpStyle::kSequence: return "sequence";
    case TpStyle::kHeadShare: return "head share";
    case TpStyle::kExperts: return "experts";
  }
  return "?";
}

absl::Status WrongType(const Module& m, TpStyle style, const char* expected) {
  return InvalidArgument(absl::StrCat("tp plan: '", m.name(), "' (", m.type_name(), ") as ",
                                      StyleName(style)),
                         absl::StrCat("a ", expected), "fix the model's ParallelPlan()");
}

// Applies a model's plan: swaps, re-places and hooks its modules.
class PlanApplier {
 public:
  PlanApplier(StrategyContext& ctx, TpComm tp)
      : ctx_(ctx),
        tp_(std::move(tp)),
        adopt_{.tensors = {.stream = ctx.run->stream,
                           .param_allocator = ctx.param_allocator,
                           .grad_allocator = ctx.grad_allocator},
               .grad_dtype = ctx.grad_dtype} {}

  absl::Status Apply(const TensorParallelPlan& plan) {
    std::vector<std::string> paths;
    for (Module* m : ctx_.model().Modules()) {
      if (m != &ctx_.model()) paths.push_back(m->name());
    }
    std::vector<int> used(plan.size(), 0);
    for (const std::string& path : paths) {
      for (size_t i = 0; i < plan.size(); ++i) {
        if (!MatchesPlanPattern(plan[i].pattern, path)) continue;
        Module* m = ctx_.model().FindModule(path);
        if (m == nullptr) continue;  // inside a module already swapped
        ++used[i];
        WEFT_RETURN_IF_ERROR(ApplyEntry(*m, plan[i]));
        break;
      }
    }
    for (size_t i = 0; i < plan.size(); ++i) {
      if (used[i] == 0) {
        return InvalidArgument(
            absl::StrCat("tp plan entry '", plan[i].pattern, "' (", StyleName(plan[i].style),
                         ") matches no module of ", ctx_.model().Summary()),
            "every plan entry naming existing module paths", "fix the model's ParallelPlan()");
      }
    }
    return absl::OkStatus();
  }

  // The startup line saying that (and why) the vocabulary shards carry
  // padding rows; empty when tp divides the table.
  std::string PaddingNote() const {
    const int n = tp_.size();
    if (padded_vocab_ == 0 || padded_vocab_ % n == 0) return "";
    const int64_t per_rank = tp::VocabRowsPerRank(padded_vocab_, n);
    return absl::StrCat(
        "tp: the model's vocabulary table has ", padded_vocab_, " rows",
        // vocab_ is known only when a vocab-split loss was swapped in.
        vocab_ > 0 ? absl::StrCat(" (", vocab_, " tokens",
                                  padded_vocab_ > vocab_
                                      ? absl::StrCat(" + ", padded_vocab_ - vocab_, " padding")
                                      : "",
                                  ")")
                   : "",
        ", not divisible by tp=", n, "; the vocab-parallel embedding and head "
        "pad it to ", per_rank * n, " rows (", per_rank, " per rank; ",
        per_rank * n - padded_vocab_, " zero row(s) on the last rank, never looked up and masked "
        "from the loss); checkpoints keep ", padded_vocab_,
        " rows. A vocab_pad_multiple divisible by ", n, " avoids the padding");
  }

 private:
  absl::Status ApplyEntry(Module& m, const TpPlanEntry& e) {
    switch (e.style) {
      case TpStyle::kColwise:
      case TpStyle::kRowwise: return SplitLinear(m, e);
      case TpStyle::kVocab: return SplitVocab(m);
      case TpStyle::kSequence: return OnSequenceShards(m);
      case TpStyle::kHeadShare: return OnHeadShares(m);
      case TpStyle::kExperts: return SplitExperts(m);
    }
    return absl::OkStatus();
  }

  absl::Status Swap(Module& old, std::unique_ptr<Module> fresh) {
    Module* parent = old.parent();
    if (parent == nullptr) return InvalidArgument("tp plan names the root", "a submodule path");
    Module* raw = fresh.get();
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Module> replaced,
                          parent->ReplaceChild(old.local_name(), std::move(fresh)));
    WEFT_RETURN_IF_ERROR(tp::AdoptValues(*replaced, *raw, adopt_));
    // Kept until the end: a tied head still points at the old table.
    replaced_.push_back(std::move(replaced));
    return absl::OkStatus();
  }

  absl::Status SplitLinear(Module& m, const TpPlanEntry& e) {
    auto* linear = dynamic_cast<Linear*>(&m);
    if (linear == nullptr) return WrongType(m, e.style, "Linear");
    tp::ParallelLinearOptions o{.bias = linear->bias() != nullptr,
                                .gelu = linear->options().gelu,
                                .weight_init = linear->weight()->init(),
                                .packed = e.packed};
    // Fewer heads than ranks: each head on the tp / heads ranks whose query
    // heads it serves (CheckHeads allowed it).
    if (e.style == TpStyle::kColwise && e.replicate_heads && e.heads > 0 &&
        e.heads < tp_.size()) {
      o.replicas = tp_.size() / e.heads;
      replicas_ = o.replicas;
    }
    std::unique_ptr<Module> fresh;
    if (e.style == TpStyle::kColwise) {
      WEFT_ASSIGN_OR_RETURN(auto column, tp::ColumnParallelLinear::Create(
                                             linear->in_features(), linear->out_features(), o, tp_));
      if (o.replicas > 1) {
        replicated_.push_back(column->weight());
        if (column->bias() != nullptr) replicated_.push_back(column->bias());
      }
      fresh = std::move(column);
    } else {
      if (o.gelu) return WrongType(m, e.style, "Linear without GELU (GELU splits by column)");
      WEFT_ASSIGN_OR_RETURN(fresh, tp::RowParallelLinear::Create(
                                       linear->in_features(), linear->out_features(), o, tp_));
    }
    return Swap(m, std::move(fresh));
  }

  absl::Status SplitVocab(Module& m) {
    if (auto* embed = dynamic_cast<TokenPositionEmbedding*>(&m)) {
      WEFT_ASSIGN_OR_RETURN(
          auto fresh, tp::VocabParallelEmbedding::Create(
                          embed->wte()->global_shape()[0],
                          embed->wpe() != nullptr ? embed->wpe()->global_shape()[0] : 0,
                          embed->wte()->global_shape()[1], embed->wte()->init(),
                          embed->wpe() != nullptr ? embed->wpe()->init() : InitSpec::Zeros(),
                          tp_));
      padded_vocab_ = embed->wte()->global_shape()[0];
      return Swap(m, std::move(fresh));
    }
    if (auto* head = dynamic_cast<LmHead*>(&m)) {
      padded_vocab_ = head->weight()->global_shape()[0];
      if (!head->tied()) {
        WEFT_ASSIGN_OR_RETURN(auto fresh,
                              tp::VocabParallelHead::Create(padded_vocab_,
                                                            head->weight()->global_shape()[1],
                                                            head->weight()->init(), tp_));
        return Swap(m, std::move(fresh));
      }
      // The table's owner must already be vocab-parallel: same name, sharded.
      Parameter* table = ctx_.model().FindParameter(head->weight()->name());
      if (table == nullptr || !table->placement().ShardedOver("tp")) {
        return FailedPrecondition(
            absl::StrCat("tied head '", m.name(), "' reads ", head->weight()->name(),
                         ", which the tp plan does not split"),
            "the embedding owning the table listed as vocab before the head",
            "add the embedding to the model's ParallelPlan()");
      }
      return Swap(m, std::make_unique<tp::VocabParallelHead>(table, tp_));
    }
    if (auto* loss = dynamic_cast<CrossEntropyLoss*>(&m)) {
      if (padded_vocab_ == 0) {
        return FailedPrecondition("tp: vocab-parallel loss '" + m.name() + "' before its head",
                                  "the LM head listed as vocab before the loss");
      }
      vocab_ = loss->num_classes();
      return Swap(m, std::make_unique<tp::VocabParallelCrossEntropy>(loss->num_classes(),
                                                                     padded_vocab_, tp_));
    }
    return WrongType(m, TpStyle::kVocab, "TokenPositionEmbedding, LmHead or CrossEntropyLoss");
  }

  absl::Status OnSequenceShards(Module& m) {
    if (!tp_.sequence_parallel) return absl::OkStatus();
    if (auto* dropout = dynamic_cast<Dropout*>(&m)) {
      dropout->SetBlockAlong(/*dim=*/1, tp_.rank(), tp_.size());
      return absl::OkStatus();
    }
    if (dynamic_cast<LayerNorm*>(&m) != nullptr) {
      tp::ReduceGradsOverTp(m, tp_);
      return absl::OkStatus();
    }
    return WrongType(m, TpStyle::kSequence, "LayerNorm or Dropout");
  }

  // Sees this rank's heads whatever sp does: gradients summed over tp.
  absl::Status OnHeadShares(Module& m) {
    if (dynamic_cast<LayerNorm*>(&m) == nullptr) {
      return WrongType(m, TpStyle::kHeadShare, "LayerNorm (per-head norm)");
    }
    tp::ReduceGradsOverTp(m, tp_);
    return absl::OkStatus();
  }

  absl::Status SplitExperts(Module& m) {
    auto* experts = dynamic_cast<ExpertMlps*>(&m);
    if (experts == nullptr) return WrongType(m, TpStyle::kExperts, "ExpertMlps");
    WEFT_RETURN_IF_ERROR(tp::SplitExperts(*experts, tp_, ctx_));
    if (!tp_.sequence_parallel) return absl::OkStatus();
    // Under sp the layer's input is this rank's sequence block, but routing
    // and the split experts need every token: run the layer on the gathered
    // sequence (sequence_gathered.h).
    Module* moe = experts->parent();
    if (moe == nullptr || moe->parent() == nullptr ||
        !moe->parent()->swappable(moe->local_name())) {
      return FailedPrecondition(
          absl::StrCat("sequence parallelism (sp) with the experts '", m.name(),
                       "': their layer is not a swappable child"),
          "a mixture-of-experts layer its parent calls through Module (as the GPT's mlp)",
          "use --strategy=tp instead of sp for this model");
    }
    return tp::SequenceGathered::Wrap(*moe->parent(), moe->local_name(), tp_);
  }

  StrategyContext& ctx_;
  const TpComm tp_;
  const tp::AdoptOptions adopt_;
  int64_t padded_vocab_ = 0;  // the table's rows (the model's padded vocabulary)
  int64_t vocab_ = 0;         // the loss's real classes
  std::vector<std::unique_ptr<Module>> replaced_;
  std::vector<Parameter*> replicated_;  // held by replicas_ tp ranks each
  int replicas_ = 1;

 public:
  const std::vector<Parameter*>& replicated() const { return replicated_; }
  int replicas() const { return replicas_; }
};

// Each rank holds whole heads: the plan says which outputs are heads.
absl::Status CheckHeads(const TensorParallelPlan& plan, int tp) {
  for (const TpPlanEntry& e : plan) {
    if (e.heads <= 0 || e.heads % tp == 0) continue;
    if (e.replicate_heads && tp % e.heads == 0) continue;  // each head on tp / heads ranks
    if (e.replicate_heads) {
      return InvalidArgument(
          absl::StrCat("'", e.pattern, "' has ", e.heads, " heads for tp=", tp),
          absl::StrCat("tp dividing ", e.heads_field, " (each rank holds whole heads), or a "
                       "multiple of it (each head replicated on tp / ", e.heads_field,
                       " ranks)"),
          absl::StrCat("use a --tp that divides or is a multiple of ", e.heads_field, "=",
                       e.heads));
    }
    return InvalidArgument(
        absl::StrCat("'", e.pattern, "' has ", e.heads, " heads, not divisible by tp=", tp),
        "a head count divisible by tp (each rank holds whole heads)",
        absl::StrCat("use a --tp that divides ", e.heads_field, "=", e.heads, ", or change ",
                     e.heads_field));
  }
  return absl::OkStatus();
}

}  // namespace

OptionSchema TensorParallelStrategy::Options() const {
  OptionSchema s;
  return s;
}

absl::Status TensorParallelStrategy::Validate(const StrategyOptionSet&,
                                              const comm::MeshLayout* mesh) const {
  if (mesh == nullptr) {
    return FailedPrecondition(absl::StrCat("--strategy=", Name(), " without a device mesh"),
                              "a job with a mesh that has a tp axis",
                              "launch several ranks with --tp=N");
  }
  const int tp = mesh->AxisSize("tp").value_or(1);
  if (sequence_parallel_ && tp < 2) {
    return InvalidArgument(
        absl::StrCat("sequence parallelism (sp) with tp=", tp),
        "sp together with tensor parallelism over tp >= 2 ranks",
        "sp shards the activations between tp regions: set --tp=2 (or more), or drop sp");
  }
  return absl::OkStatus();
}

absl::StatusOr<StrategyResult> TensorParallelStrategy::Apply(StrategyContext& ctx) {
  StrategyResult result;
  for (const std::string& n : ctx.applied->strategy_names) {
    if (n == "tp" || n == "sp") {
      return InvalidArgument(absl::StrCat("--strategy lists both tp and sp"),
                             "one of them: sp is tp with sequence parallelism");
    }
  }
  Model& model = ctx.model();
  const TensorParallelPlan plan = model.ParallelPlan();
  if (plan.empty()) {
    return FailedPrecondition(absl::StrCat(model.Summary(), " ships no tensor-parallel plan"),
                              "a model overriding Model::ParallelPlan() (e.g. the GPT)");
  }
  TpComm tp;
  WEFT_ASSIGN_OR_RETURN(tp.group, ctx.mesh->Group("tp"));
  tp.stream = ctx.run->stream;
  tp.sequence_parallel = sequence_parallel_;
  WEFT_RETURN_IF_ERROR(CheckHeads(plan, tp.size()));
  if (sequence_parallel_) {
    // Fail at startup, not at the first forward after the model is built.
    WEFT_ASSIGN_OR_RETURN(int64_t seq_len, ProbeSequenceLength(model, *ctx.run));
    const int cp = ctx.mesh->AxisSize("cp").value_or(1);
    if (seq_len > 0) WEFT_RETURN_IF_ERROR(tp::CheckSequenceShards(seq_len, cp, tp.size()));
  }
  PlanApplier applier(ctx, tp);
  WEFT_RETURN_IF_ERROR(applier.Apply(plan));
  if (std::string note = applier.PaddingNote(); !note.empty()) result.notes.push_back(note);
  if (!applier.replicated().empty()) {
    // The tp ranks holding my copy of the replicated heads: consecutive
    // positions of my tp group. Every rank creates its own group.
    WEFT_ASSIGN_OR_RETURN(std::vector<int> tp_ranks, ctx.mesh->GroupRanks("tp"));
    const int r = applier.replicas(), first = tp.rank() / r * r;
    const std::vector<int> holders(tp_ranks.begin() + first, tp_ranks.begin() + first + r);
    WEFT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> group,
                          ctx.mesh->NewGroup(holders, "tp_head_replicas"));
    result.keep_alive.push_back(group);
    result.participants.push_back(std::make_unique<tp::ReplicatedHeadGrads>(
        applier.replicated(), group, ctx.run->stream));
    result.notes.push_back(absl::StrCat(
        "tp: ", applier.replicated().size(), " K/V projection parameter(s) with fewer heads than "
        "tp=", tp.size(), ": each head is replicated on ", r,
        " ranks (those whose query heads it serves), their gradients summed over them"));
  }
  // What every tp rank holds whole is saved once (rank 0's copy).
  for (Parameter* p : model.Parameters()) {
    if (!p->placement().ShardedOver("tp")) p->set_mp_replica(tp.rank());
  }
  result.keep_alive.push_back(tp.group);
  if (sequence_parallel_) {
    // Between stages the residual stream is this rank's sequence shard.
    const int n = tp.size();
    // The composer chains it after earlier strategies' boundaries.
    result.stage_boundary = [n](const StageTensor& t) -> absl::StatusOr<StageTensor> {
      StageTensor out = t;
      if (out.shape.size() < 2 || out.shape[1] % n != 0) {
        return InvalidArgument(absl::StrCat("sp over ", n, " ranks of a stage input ",
                                            out.ToString()),
                               absl::StrCat("a sequence dimension (1) divisible by ", n));
      }
      out.shape[1] /= n;
      return out;
    };
  }
  return result;
}

}  // namespace weft
