#include "core/parallel/sharded_units.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/mlp.h"
#include "core/nn/stage.h"
#include "core/parallel/reduce_dtype.h"

namespace weft {
namespace {

// Parameters the units shard: all but those already sharded over dp_shard.
void Collect(Module& m, std::vector<Parameter*>* out) {
  for (Parameter* p : m.Parameters()) {
    if (p->placement().ReplicatedOver("dp_shard")) out->push_back(p);
  }
}

// How many blocks `p` is split into over dp_shard (1: not split).
int ShardBlocks(const Parameter& p) {
  int blocks = 1;
  for (const AxisPlacement& a : p.placement().axes()) {
    if (a.kind == AxisPlacement::Kind::kShard && a.axis == "dp_shard") blocks *= a.count;
  }
  return blocks;
}

// The wrapped module whose unit holds `m` (nullptr: the root unit).
Module* UnitModule(Module* m, const std::vector<Module*>& wrapped) {
  for (; m != nullptr; m = m->parent()) {
    if (std::find(wrapped.begin(), wrapped.end(), m) != wrapped.end()) return m;
  }
  return nullptr;
}

bool Within(const Module* m, const Module* ancestor) {
  for (; m != nullptr; m = m->parent()) {
    if (m == ancestor) return true;
  }
  return false;
}

// The first and last stage whose modules overlap `m`'s subtree ({-1, -1}:
// none).
std::pair<int, int> StagesOf(const Module* m, const std::vector<Stage>& stages) {
  std::pair<int, int> r{-1, -1};
  for (int s = 0; s < static_cast<int>(stages.size()); ++s) {
    for (const Module* sm : stages[s].modules) {
      if (!Within(m, sm) && !Within(sm, m)) continue;
      if (r.first < 0) r.first = s;
      r.second = s;
    }
  }
  return r;
}

// An MLP fuses GELU's backward into proj's input-gradient GEMM only when
// fc's gradient is resident as proj's backward starts (core/nn/linear.cc),
// which a wrap list that puts fc and proj in different units prevents. It
// still trains the same model, slower and (in bf16) rounded twice: say so.
std::string SplitMlpNote(Model& model, const std::vector<Module*>& wrapped,
                         const ShardedUnitsParticipant::Config& config) {
  std::vector<std::string> split;
  for (Module* m : model.Modules()) {
    auto* mlp = dynamic_cast<Mlp*>(m);
    if (mlp == nullptr || mlp->fc() == nullptr || mlp->proj() == nullptr) continue;
    if (UnitModule(mlp->fc(), wrapped) != UnitModule(mlp->proj(), wrapped)) {
      split.push_back(mlp->name());
    }
  }
  if (split.empty()) return "";
  return absl::StrCat(config.strategy, ": ", config.wrap_option, " puts fc and proj of ",
                      split.size(), " MLP", split.size() > 1 ? "s" : "", " (", split[0],
                      split.size() > 1 ? ", ..." : "",
                      ") in different units, so their GELU backward runs as its own kernel "
                      "instead of fused into proj's input-gradient GEMM; wrap Mlp or "
                      "TransformerBlock to keep the fusion");
}

}  // namespace

absl::StatusOr<ShardedUnitsParticipant::Config> ShardedUnitsParticipant::ConfigFromOptions(
    StrategyContext& ctx, StrategyResult& result, std::string strategy, std::string wrap_option,
    const std::string& default_wrap) {
  Config config;
  const std::string& value = ctx.options->GetString(wrap_option);
  for (absl::string_view t : absl::StrSplit(value, '|', absl::SkipEmpty())) {
    config.wrap_types.insert(std::string(t));
  }
  if (value != default_wrap && config.wrap_types.empty()) {
    result.notes.push_back(absl::StrCat(
        strategy, ": ", wrap_option, " is empty: the whole model is one unit, gathered whole "
        "for every forward and backward (parameters take ddp's memory while it runs)"));
  }
  if (value != default_wrap) {
    std::set<std::string> types;  // the model's parts: the root is never wrapped
    for (Module* m : ctx.model().Modules()) {
      if (m != &ctx.model()) types.insert(m->type_name());
    }
    std::vector<std::string> unknown;
    for (const std::string& t : config.wrap_types) {
      if (types.count(t) == 0) unknown.push_back(t);
    }
    if (!unknown.empty()) {
      return InvalidArgument(
          absl::StrCat(wrap_option, "=", value, " names no module of this model: ",
                       absl::StrJoin(unknown, ", ")),
          absl::StrCat("module types of the model: ", absl::StrJoin(types, ", ")),
          absl::StrCat("a type that matches nothing leaves its parameters in the root unit, "
                       "gathered whole like ddp; the default is ", wrap_option, "=",
                       default_wrap));
    }
  }
  config.grad_dtype = ctx.grad_dtype;
  WEFT_ASSIGN_OR_RETURN(config.reduce_dtype, ReduceDType(*ctx.options, ctx.grad_dtype));
  config.strategy = std::move(strategy);
  config.wrap_option = std::move(wrap_option);
  return config;
}

absl::Status ShardedUnitsParticipant::AddUnit(const std::string& name, std::vector<Parameter*> params,
                                      StrategyContext& ctx) {
  ShardedGroup::Options o;
  // Over one rank a shard is the whole: keep parameters and gradients whole
  // and skip the per-unit gather copies, gradient buffers and the add into
  // a separate shard (fsdp ran 5.6% behind plain GPT-2 124M on an H100 at
  // world size 1 with them). Same math, less memory (Build says so in the
  // run's notes).
  const ShardedGroup::Mode mode =
      shard_->size() == 1 ? ShardedGroup::Mode::kFull : ShardedGroup::Mode::kSharded;
  o.params = mode;
  o.grads = mode;
  o.device = ctx.run->device;
  o.stream = stream_;
  o.grad_dtype = config_.grad_dtype;
  o.reduce_dtype = config_.reduce_dtype;
  o.ops = ctx.run->ops;
  o.param_allocator = ctx.param_allocator;
  o.grad_allocator = ctx.grad_allocator;
  o.axis = config_.axis;
  WEFT_ASSIGN_OR_RETURN(auto unit, ShardedGroup::Create(name, params, shard_, o));
  for (Parameter* p : params) unit_of_[p] = static_cast<int>(units_.size());
  units_.push_back(std::move(unit));
  return absl::OkStatus();
}

absl::Status ShardedUnitsParticipant::Build(StrategyContext& ctx, StrategyResult& result) {
  Model& model = ctx.model();
  // Wrapped modules in forward (pre-)order; nested wraps are not split.
  std::vector<Module*> wrapped;
  for (Module* m : model.Modules()) {
    if (m == &model || config_.wrap_types.count(m->type_name()) == 0) continue;
    bool nested = false;
    for (Module* p = m->parent(); p != nullptr; p = p->parent()) {
      nested |= std::find(wrapped.begin(), wrapped.end(), p) != wrapped.end();
    }
    if (!nested) wrapped.push_back(m);
  }
  // (Over one rank gradients stay resident whatever the units: no note.)
  if (std::string note = SplitMlpNote(model, wrapped, config_);
      !note.empty() && shard_->size() > 1) {
    result.notes.push_back(std::move(note));
  }
  if (shard_->size() == 1) {
    result.notes.push_back(config_.strategy +
                               " over a dp_shard group of one rank: parameters and gradients "
                               "stay whole (nothing to shard)");
  }
  std::vector<Parameter*> in_units;
  for (Module* m : wrapped) Collect(*m, &in_units);
  std::vector<Parameter*> root, copied;
  for (Parameter* p : model.Parameters()) {
    if (!p->placement().ReplicatedOver("dp_shard")) {
      kept_.push_back(p);
    } else if (std::find(in_units.begin(), in_units.end(), p) == in_units.end()) {
      (p->has_copies() ? copied : root).push_back(p);
    }
  }
  for (Parameter* p : in_units) {
    if (p->shared()) {
      return FailedPrecondition(
          absl::StrCat("shared parameter ", p->name(), " inside a ", config_.strategy, " unit"),
          "tied parameters outside the wrapped modules",
          absl::StrCat("change --strategy_options=", config_.wrap_option));
    }
  }
  for (Parameter* p : in_units) {
    if (p->has_copies()) {
      return FailedPrecondition(
          absl::StrCat(p->name(), ", which has copies on other ranks, inside a ", config_.strategy,
                       " unit"),
          "parameters with copies (tied across pipeline stages) outside the wrapped modules",
          absl::StrCat("change --strategy_options=", config_.wrap_option));
    }
  }
  if (root.empty() && copied.empty() && wrapped.empty()) {
    return InvalidArgument(config_.strategy + " on a model without parameters",
                           "a model with parameters");
  }
  // Index 0 is the root unit even when it has no parameters (nullptr then).
  unit_module_.push_back(&model);
  if (!root.empty()) {
    WEFT_RETURN_IF_ERROR(AddUnit("root", root, ctx));
  } else {
    units_.push_back(nullptr);
  }
  for (Parameter* p : copied) {
    unit_module_.push_back(&model);
    WEFT_RETURN_IF_ERROR(AddUnit(p->name(), {p}, ctx));
  }
  num_root_ = static_cast<int>(units_.size());
  for (Module* m : wrapped) {
    std::vector<Parameter*> params;
    Collect(*m, &params);
    if (params.empty()) continue;
    unit_module_.push_back(m);
    WEFT_RETURN_IF_ERROR(AddUnit(m->name(), params, ctx));
  }
  const std::vector<Stage> stages = model.Stages();
  auto add_stages_of = [&](const Module* m, std::vector<int>* out) {
    const auto [first, last] = StagesOf(m, stages);
    for (int s = first; s >= 0 && s <= last; ++s) {
      if (std::find(out->begin(), out->end(), s) == out->end()) out->push_back(s);
    }
  };
  for (int u = 0; u < static_cast<int>(unit_module_.size()); ++u) {
    std::vector<int>& mine = unit_stages_.emplace_back();
    // A root unit's stages are those of the modules that use its parameters
    // (the model itself spans every stage): under an interleaved pipeline the
    // root's hooks wrap every chunk, and a chunk that never touches them
    // gathered and reduce-scattered the unit (the embedding) for nothing.
    if (u < num_root_ && units_[u] != nullptr) {
      for (Module* m : model.Modules()) {
        std::vector<Parameter*> used = m->held_own_parameters();
        for (Parameter* p : m->BorrowedParameters()) used.push_back(p);
        if (std::any_of(used.begin(), used.end(),
                        [&](Parameter* p) { return units_[u]->Contains(p); })) {
          add_stages_of(m, &mine);
        }
      }
    }
    if (mine.empty()) add_stages_of(unit_module_[u], &mine);  // as before: its module's
  }
  InstallHooks(model);
  result.grad_norm_sums_dp_shard = true;
  return absl::OkStatus();
}

absl::Status ShardedUnitsParticipant::Gathered(int u) {
  if (units_[u] == nullptr) return absl::OkStatus();
  WEFT_RETURN_IF_ERROR(units_[u]->Gather(/*async=*/false));
  return units_[u]->WaitGathered();
}

// A pipeline rank with several chunks (interleaved) runs one chunk's stages
// at a time and then whatever its schedule says, so the unit that runs next
// is in the same chunk or not known. Prefetching in model order gathered
// another chunk's unit after that chunk's last backward of the step (the
// root's pre-backward took the model's last unit): it stayed bound to the
// pre-update values, and the next step's forward ran on them.
bool ShardedUnitsParticipant::Runs(int u, const RunContext& ctx) const {
  if (!ctx.stage_range) return true;
  const auto& range = *ctx.stage_range;
  return std::any_of(unit_stages_[u].begin(), unit_stages_[u].end(),
                     [&](int s) { return s >= range.first && s < range.last; });
}

absl::Status ShardedUnitsParticipant::Prefetch(int u, const RunContext& ctx) {
  if (u < num_root_ || u >= static_cast<int>(units_.size()) || !Runs(u, ctx)) {
    return absl::OkStatus();
  }
  return units_[u]->Gather(/*async=*/true);
}

void ShardedUnitsParticipant::InstallHooks(Model& model) {
  using HP = Module::HookPoint;
  // The root's hooks wrap every pipeline chunk: prefetch the first (last)
  // unit of the stages that run, not of the model.
  model.AddHook(HP::kPreForward, [this](Module&, RunContext& ctx) -> absl::Status {
    for (int u = 0; u < num_root_; ++u) {
      if (Runs(u, ctx)) WEFT_RETURN_IF_ERROR(Gathered(u));
    }
    for (int u = num_root_; u < static_cast<int>(units_.size()); ++u) {
      if (Runs(u, ctx)) return Prefetch(u, ctx);
    }
    return absl::OkStatus();
  });
  model.AddHook(HP::kPostForward, [this](Module&, RunContext& ctx) -> absl::Status {
    if (ctx.training) return absl::OkStatus();
    for (int u = 0; u < num_root_; ++u) {
      if (units_[u] != nullptr && Runs(u, ctx)) units_[u]->ReleaseFull();
    }
    return absl::OkStatus();
  });
  model.AddHook(HP::kPreBackward, [this](Module&, RunContext& ctx) -> absl::Status {
    for (int u = 0; u < num_root_; ++u) {
      if (!Runs(u, ctx)) continue;
      WEFT_RETURN_IF_ERROR(Gathered(u));
      if (units_[u] != nullptr) WEFT_RETURN_IF_ERROR(units_[u]->PrepareGrads());
    }
    for (int u = static_cast<int>(units_.size()) - 1; u >= num_root_; --u) {
      if (Runs(u, ctx)) return Prefetch(u, ctx);
    }
    return absl::OkStatus();
  });
  model.AddHook(HP::kGradientsReady, [this](Module&, RunContext& ctx) -> absl::Status {
    for (int u = 0; u < num_root_; ++u) {
      if (units_[u] == nullptr || !Runs(u, ctx)) continue;
      WEFT_RETURN_IF_ERROR(ReduceUnit(u));
      units_[u]->ReleaseFull();
    }
    return absl::OkStatus();
  });
  for (int u = num_root_; u < static_cast<int>(units_.size()); ++u) {
    Module* m = unit_module_[u];
    // A recompute replay runs inside the unit's backward: unit u + 1 has
    // already reduced and released (prefetching it would bind parameters the
    // optimizer is about to change, and the next forward would use them),
    // and unit u's backward needs its parameters right after.
    m->AddHook(HP::kPreForward, [this, u](Module&, RunContext& ctx) -> absl::Status {
      WEFT_RETURN_IF_ERROR(Gathered(u));
      return ctx.recomputing ? absl::OkStatus() : Prefetch(u + 1, ctx);
    });
    m->AddHook(HP::kPostForward, [this, u](Module&, RunContext& ctx) -> absl::Status {
      if (ctx.recomputing) return absl::OkStatus();
      if (config_.reshard_after_forward || !ctx.training) units_[u]->ReleaseFull();
      return absl::OkStatus();
    });
    m->AddHook(HP::kPreBackward, [this, u](Module&, RunContext& ctx) -> absl::Status {
      WEFT_RETURN_IF_ERROR(Gathered(u));
      WEFT_RETURN_IF_ERROR(units_[u]->PrepareGrads());
      return Prefetch(u - 1, ctx);
    });
    m->AddHook(HP::kGradientsReady, [this, u](Module&, RunContext&) -> absl::Status {
      WEFT_RETURN_IF_ERROR(ReduceUnit(u));
      units_[u]->ReleaseFull();
      return absl::OkStatus();
    });
  }
}

absl::Status ShardedUnitsParticipant::ReduceUnit(int u) { return reduces_.Launch(*units_[u]); }

absl::Status ShardedUnitsParticipant::ZeroGrad() {
  for (auto& u : units_) {
    if (u != nullptr) WEFT_RETURN_IF_ERROR(u->ZeroShardGrad());
  }
  for (Parameter* p : kept_) WEFT_RETURN_IF_ERROR(p->grad.Zero(stream_));
  return absl::OkStatus();
}

absl::Status ShardedUnitsParticipant::BeforeBackward(const BackwardInfo&) {
  // The previous backward's reductions own their full gradient buffers.
  return reduces_.Drain();
}

absl::Status ShardedUnitsParticipant::FinishGradients() {
  WEFT_RETURN_IF_ERROR(reduces_.Drain());
  if (replicate_ == nullptr || replicate_->size() == 1) return absl::OkStatus();
  // HSDP: shards are replicated over dp_replicate; sum their gradients.
  std::vector<std::shared_ptr<comm::Work>> works;
  for (auto& u : units_) {
    if (u == nullptr) continue;
    works.push_back(replicate_->AllReduce(u->shard_grad(),
                                          {.op = comm::ReduceOp::kSum, .stream = stream_}));
  }
  for (auto& w : works) WEFT_RETURN_IF_ERROR(Annotate(w->Wait(), "hsdp replica all-reduce"));
  return absl::OkStatus();
}

std::optional<std::vector<OptimTarget>> ShardedUnitsParticipant::OptimizerTargets() {
  std::vector<OptimTarget> targets;
  for (auto& u : units_) {
    if (u == nullptr) continue;
    for (OptimTarget& t : u->OptimizerTargets()) {
      // HSDP: the same shard on every rank of dp_replicate.
      t.replica = replicate_ != nullptr ? replicate_->rank() : 0;
      targets.push_back(std::move(t));
    }
  }
  // Kept parameters, whole: dp_shard / blocks ranks hold each block.
  for (Parameter* p : kept_) {
    targets.push_back({p->name(), p->value, p->grad, p->weight_decay(), p, 0,
                       shard_->rank() / ShardBlocks(*p)});
  }
  return targets;
}

absl::Status ShardedUnitsParticipant::ReduceGradNormSq(Tensor& norm_sq) {
  // Disjoint over dp_shard, identical over dp_replicate. Kept parameters
  // come in as shares from the strategy that placed them (Build sets
  // grad_norm_sums_dp_shard): rebuilding the norm here from this rank's
  // pieces dropped what earlier participants summed (a pipeline's other
  // stages, the tp halves), so ranks clipped with different norms.
  return Annotate(
      shard_->AllReduce(norm_sq, {.op = comm::ReduceOp::kSum, .stream = stream_})->Wait(),
      config_.strategy + " gradient norm");
}


}  // namespace weft
