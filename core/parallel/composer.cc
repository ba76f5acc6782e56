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

struct Ordered {
  std::vector<std::unique_ptr<Strategy>> strategies;
  std::vector<StrategyOptionSet> options;  // parallel to strategies
};

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

absl::StatusOr<Ordered> CreateOrdered(const std::vector<std::string>& names,
                                      const StrategyOptionValues& values,
                                      const comm::MeshLayout* mesh) {
  Ordered out;
  std::vector<std::unique_ptr<Strategy>>& strategies = out.strategies;
  for (const std::string& n : names) {
    if (std::count(names.begin(), names.end(), n) > 1) {
      return InvalidArgument(absl::StrCat("strategy '", n, "' is listed twice"),
                             "each strategy once in --strategy");
    }
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Strategy> s, CreateStrategy(n));
    strategies.push_back(std::move(s));
  }
  // Stable: strategies of one phase keep the order the user gave.
  std::stable_sort(strategies.begin(), strategies.end(),
                   [](const auto& a, const auto& b) { return a->Phase() < b->Phase(); });
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
    const bool built_in = std::all_of(data_parallel.begin(), data_parallel.end(), [](auto& n) {
      return n == "dp" || n == "ddp" || n == "zero" || n == "fsdp";
    });
    return InvalidArgument(
        absl::StrCat("data-parallel strategies ", absl::StrJoin(data_parallel, " and "),
                     " both reduce gradients over the same ranks"),
        absl::StrCat("at most one data-parallel strategy (", absl::StrJoin(known, ", "), ")"),
        built_in ? "fsdp with dp_replicate > 1 already gives hybrid sharding (HSDP)"
                 : "keep one of them in --strategy");
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

}  // namespace

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
  return CreateOrdered(names, options, mesh).status();
}

absl::Status ComposeStrategies(const std::vector<std::string>& names,
                               const StrategyOptionValues& options, StrategyContext& ctx) {
  WEFT_ASSIGN_OR_RETURN(Ordered ordered,
                        CreateOrdered(names, options, ctx.mesh ? &ctx.mesh->layout() : nullptr));
  for (size_t i = 0; i < ordered.strategies.size(); ++i) {
    Strategy& s = *ordered.strategies[i];
    ctx.options = &ordered.options[i];
    absl::Status a = s.Apply(ctx);
    ctx.options = nullptr;
    if (!a.ok()) return Annotate(a, absl::StrCat("applying strategy '", s.Name(), "'"));
    ctx.state->strategy_names.push_back(s.Name());
    ctx.state->strategy_options.push_back(ordered.options[i]);
  }
  return absl::OkStatus();
}

}  // namespace weft
