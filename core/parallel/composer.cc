#include "core/parallel/composer.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/parallel/strategy_registry.h"

namespace weft {
namespace {

// Registered strategies that list `axis` in RequiredAxes (for hints).
std::vector<std::string> StrategiesUsing(const std::string& axis) {
  std::vector<std::string> users;
  for (const std::string& name : RegisteredStrategies()) {
    absl::StatusOr<std::unique_ptr<Strategy>> s = CreateStrategy(name);
    if (!s.ok()) continue;
    const std::vector<std::string> axes = (*s)->RequiredAxes();
    if (std::find(axes.begin(), axes.end(), axis) != axes.end()) users.push_back(name);
  }
  return users;
}

// `idle`: axes the chosen strategies work on that have size 1, where the
// ranks were probably meant to go (--strategy=tp on 2 ranks without --tp=2
// leaves them on dp_shard).
absl::Status UnusedAxis(const std::string& axis, int size, const std::string& where,
                        const std::vector<std::string>& idle) {
  const std::vector<std::string> users = StrategiesUsing(axis);
  std::string hint = absl::StrCat("add a ", axis, " strategy or set --", axis, "=1");
  if (!idle.empty()) {
    absl::StrAppend(&hint, "; or give the ranks to an axis the chosen strategies work on, e.g. --",
                    idle.front(), "=", size, " (", absl::StrJoin(idle, ", "),
                    idle.size() == 1 ? " has" : " have", " size 1)");
  }
  return FailedPrecondition(
      absl::StrCat("no strategy uses mesh axis ", axis, " of size ", size, where),
      users.empty() ? absl::StrCat("a strategy that works on ", axis, " (none is registered)")
                    : absl::StrCat("one of the strategies that work on it: ",
                                   absl::StrJoin(users, ", ")),
      hint);
}

absl::Status CheckAxes(const std::vector<std::unique_ptr<Strategy>>& strategies,
                       const comm::MeshLayout& mesh) {
  if (mesh.world_size() <= 1) return absl::OkStatus();  // one rank: nothing to split
  for (const auto& s : strategies) {
    for (const std::string& axis : s->RequiredAxes()) {
      if (axis == "ep") continue;  // carved from dp_shard x cp, not a mesh axis
      if (!mesh.AxisSize(axis).ok()) {
        return FailedPrecondition(
            absl::StrCat("strategy '", s->Name(), "' works on mesh axis ", axis, " but mesh ",
                         mesh.ToString(), " has none"),
            absl::StrCat("a mesh with axes ", absl::StrJoin(s->RequiredAxes(), ", ")),
            absl::StrCat("set --", axis, " to the size it should have"));
      }
    }
  }
  std::vector<std::string> idle;  // axes the strategies work on, of size 1
  for (const auto& s : strategies) {
    for (const std::string& axis : s->RequiredAxes()) {
      absl::StatusOr<int> n = mesh.AxisSize(axis);
      if (n.ok() && *n == 1 && std::find(idle.begin(), idle.end(), axis) == idle.end()) {
        idle.push_back(axis);
      }
    }
  }
  for (const comm::MeshAxis& a : mesh.axes()) {
    if (a.size <= 1) continue;
    const bool used = std::any_of(strategies.begin(), strategies.end(), [&](const auto& s) {
      const std::vector<std::string> axes = s->RequiredAxes();
      return std::find(axes.begin(), axes.end(), a.name) != axes.end();
    });
    if (!used) {
      return UnusedAxis(a.name, a.size, absl::StrCat(" (mesh ", mesh.ToString(), ")"), idle);
    }
  }
  return absl::OkStatus();
}

// Chains `next` after `before` (either may be null).
StageBoundaryFn Chain(StageBoundaryFn before, StageBoundaryFn next) {
  if (!before) return next;
  if (!next) return before;
  return [before, next](const StageTensor& t) -> absl::StatusOr<StageTensor> {
    WEFT_ASSIGN_OR_RETURN(StageTensor mid, before(t));
    return next(mid);
  };
}

void Fold(const Strategy& s, const StrategyOptionSet& options, StrategyResult r,
          ParallelState& state) {
  const std::string name = s.Name();
  if (!s.KeepsParametersWhole(options)) state.sharding_strategies.push_back(name);
  state.step_graph_capturable &= s.CapturableInStepGraph();
  for (auto& p : r.participants) state.participants.push_back(std::move(p));
  for (std::string& n : r.notes) state.notes.push_back(std::move(n));
  if (r.step_schedule != nullptr) state.step_schedule = std::move(r.step_schedule);
  state.stage_boundary = Chain(std::move(state.stage_boundary), std::move(r.stage_boundary));
  if (r.loss_group != nullptr) state.loss_groups.push_back(std::move(r.loss_group));
  state.replica_copy = state.replica_copy * r.replica_copies + r.replica_copy;
  state.replica_copies *= r.replica_copies;
  state.grad_norm_sums_dp_shard |= r.grad_norm_sums_dp_shard;
  for (auto& k : r.keep_alive) state.keep_alive.push_back(std::move(k));
  state.strategy_names.push_back(name);
  state.strategy_options.push_back(options);
}

absl::Status ApplyOrdered(OrderedStrategies& ordered, StrategyContext& ctx,
                          ParallelState& state) {
  ctx.applied = &state;
  for (size_t i = 0; i < ordered.strategies.size(); ++i) {
    Strategy& s = *ordered.strategies[i];
    ctx.options = &ordered.options[i];
    absl::StatusOr<StrategyResult> r = s.Apply(ctx);
    ctx.options = nullptr;
    if (!r.ok()) return Annotate(r.status(), absl::StrCat("applying strategy '", s.Name(), "'"));
    Fold(s, ordered.options[i], *std::move(r), state);
  }
  return absl::OkStatus();
}

}  // namespace

void ApplicationOrder(std::vector<std::unique_ptr<Strategy>>& strategies) {
  // Stable: strategies of one phase keep the order the user gave.
  std::stable_sort(strategies.begin(), strategies.end(),
                   [](const auto& a, const auto& b) { return a->Phase() < b->Phase(); });
  // Then each strategy moves behind the last of its phase it must follow
  // (bounded: two strategies that each list the other settle somewhere).
  size_t moves = 0;
  const size_t max_moves = strategies.size() * strategies.size();
  for (size_t i = 0; i < strategies.size() && moves <= max_moves; ++i) {
    const std::vector<std::string> after = strategies[i]->After();
    size_t last = i;
    for (size_t j = i + 1; j < strategies.size(); ++j) {
      if (strategies[j]->Phase() == strategies[i]->Phase() &&
          std::find(after.begin(), after.end(), strategies[j]->Name()) != after.end()) {
        last = j;
      }
    }
    if (last == i) continue;
    std::rotate(strategies.begin() + i, strategies.begin() + i + 1,
                strategies.begin() + last + 1);
    ++moves;
    --i;  // the strategy now at i has not been looked at
  }
}

absl::StatusOr<OrderedStrategies> OrderAndValidate(const std::vector<std::string>& names,
                                                   const StrategyOptionValues& values,
                                                   const comm::MeshLayout* mesh) {
  OrderedStrategies out;
  std::vector<std::unique_ptr<Strategy>>& strategies = out.strategies;
  for (const std::string& n : names) {
    if (std::count(names.begin(), names.end(), n) > 1) {
      return InvalidArgument(absl::StrCat("strategy '", n, "' is listed twice"),
                             "each strategy once in --strategy");
    }
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Strategy> s, CreateStrategy(n));
    strategies.push_back(std::move(s));
  }
  ApplicationOrder(strategies);
  std::vector<std::string> data_parallel;
  for (const auto& s : strategies) {
    if (s->Phase() == StrategyPhase::kDataParallel) data_parallel.push_back(s->Name());
  }
  if (data_parallel.size() > 1) {
    // Plugins register data-parallel strategies too: list what this build has.
    std::vector<std::string> known;
    for (const std::string& name : RegisteredStrategies()) {
      absl::StatusOr<std::unique_ptr<Strategy>> s = CreateStrategy(name);
      if (s.ok() && (*s)->Phase() == StrategyPhase::kDataParallel) known.push_back(name);
    }
    std::string hint = "keep one of them in --strategy";
    for (const auto& s : strategies) {
      if (s->Phase() != StrategyPhase::kDataParallel) continue;
      if (std::string h = s->HintBesideDataParallel(); !h.empty()) {
        hint = std::move(h);
        break;
      }
    }
    return InvalidArgument(
        absl::StrCat("data-parallel strategies ", absl::StrJoin(data_parallel, " and "),
                     " both reduce gradients over the same ranks"),
        absl::StrCat("at most one data-parallel strategy (", absl::StrJoin(known, ", "), ")"),
        hint);
  }
  std::vector<const Strategy*> raw;
  for (const auto& s : strategies) raw.push_back(s.get());
  WEFT_ASSIGN_OR_RETURN(out.options, ResolveStrategyOptions(raw, values));
  if (mesh != nullptr) WEFT_RETURN_IF_ERROR(CheckAxes(strategies, *mesh));
  for (size_t i = 0; i < strategies.size(); ++i) {
    absl::Status v = strategies[i]->Validate(out.options[i], mesh);
    if (!v.ok()) return Annotate(v, absl::StrCat("strategy '", strategies[i]->Name(), "'"));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ParseStrategyList(const std::string& list) {
  std::vector<std::string> names;
  if (absl::StripAsciiWhitespace(list).empty()) return names;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    std::string n(absl::StripAsciiWhitespace(part));
    if (n.empty()) {
      return InvalidArgument(absl::StrCat("empty name in --strategy='", list, "'"),
                             "comma-separated names such as 'ddp' or 'fsdp'");
    }
    if (n == "auto") {
      // The memory planner (tools/estimate/planner.h) replaces `auto` with a
      // layout before the trainer sees it, in binaries that run it.
      return InvalidArgument(
          absl::StrCat("--strategy='", list, "': auto picks a layout with the memory planner, ",
                       "which this program does not run"),
          "strategy names such as 'ddp', 'zero' or 'fsdp'",
          "//models/gpt:train plans GPT jobs (--strategy=auto --memory_budget=B); here pick a "
          "strategy yourself, or compare layouts with //tools:estimate");
    }
    names.push_back(n);
  }
  return names;
}

absl::Status CheckAxisUsed(const std::vector<std::string>& names, const std::string& axis,
                           int size) {
  if (size <= 1) return absl::OkStatus();
  for (const std::string& n : names) {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Strategy> s, CreateStrategy(n));
    const std::vector<std::string> axes = s->RequiredAxes();
    if (std::find(axes.begin(), axes.end(), axis) != axes.end()) return absl::OkStatus();
  }
  return UnusedAxis(axis, size, "", {});
}

absl::Status ValidateStrategies(const std::vector<std::string>& names,
                                const StrategyOptionValues& options,
                                const comm::MeshLayout* mesh) {
  return OrderAndValidate(names, options, mesh).status();
}

absl::Status ApplyPlan(const ParallelPlan& plan, StrategyContext& ctx, ParallelState& state) {
  for (const std::string& note : plan.notes()) state.notes.push_back(note);
  OrderedStrategies ordered;
  for (const std::string& name : plan.strategies()) {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Strategy> s, CreateStrategy(name));
    ordered.strategies.push_back(std::move(s));
  }
  ordered.options = plan.options();
  return ApplyOrdered(ordered, ctx, state);
}

absl::Status ComposeStrategies(const std::vector<std::string>& names,
                               const StrategyOptionValues& options, StrategyContext& ctx,
                               ParallelState& state) {
  WEFT_ASSIGN_OR_RETURN(OrderedStrategies ordered,
                        OrderAndValidate(names, options, ctx.mesh ? &ctx.mesh->layout() : nullptr));
  return ApplyOrdered(ordered, ctx, state);
}

}  // namespace weft
