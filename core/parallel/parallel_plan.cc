#include "core/parallel/parallel_plan.h"

#include <algorithm>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/parallel/composer.h"
#include "core/parallel/strategy_registry.h"

namespace weft {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

bool IsTrainingAxis(const std::string& axis) {
  return axis == "ep" || Contains(comm::TrainingMeshAxes(), axis);
}

// The axes of `names` that are their own (not the training mesh's), in
// order of first mention, sized by --mesh_axes (1 when not given).
absl::StatusOr<std::vector<comm::MeshAxis>> OwnAxes(const std::vector<std::string>& names,
                                                    const std::map<std::string, int>& sizes) {
  std::vector<comm::MeshAxis> axes;
  std::vector<std::string> seen;
  for (const std::string& n : names) {
    absl::StatusOr<std::unique_ptr<Strategy>> s = CreateStrategy(n);
    if (!s.ok()) continue;  // reported when the plan orders them
    for (const std::string& axis : (*s)->RequiredAxes()) {
      if (IsTrainingAxis(axis) || Contains(seen, axis)) continue;
      seen.push_back(axis);
      auto it = sizes.find(axis);
      axes.push_back({axis, it == sizes.end() ? 1 : it->second});
    }
  }
  for (const auto& [axis, size] : sizes) {
    if (IsTrainingAxis(axis)) {
      return InvalidArgument(absl::StrCat("--mesh_axes=", axis, "=", size),
                             "axes strategies declare as their own",
                             absl::StrCat("the training mesh's axes have flags: --", axis, "=",
                                          size));
    }
    if (!Contains(seen, axis) && size > 1) {
      return FailedPrecondition(
          absl::StrCat("no applied strategy works on --mesh_axes axis ", axis, " of size ",
                       size),
          "an axis that one of the strategies in --strategy declares",
          absl::StrCat("add the strategy that works on ", axis, ", or drop it from --mesh_axes"));
    }
  }
  return axes;
}

// Adds, until nothing changes, the registered strategies that join the
// plan unnamed and what the plan's strategies imply.
absl::Status AddJoinedAndImplied(const PlanView& view, std::vector<std::string>& names) {
  const std::vector<std::string> registered = RegisteredStrategies();
  for (size_t round = 0; round <= registered.size(); ++round) {
    bool changed = false;
    for (const std::string& r : registered) {
      if (Contains(names, r)) continue;
      absl::StatusOr<std::unique_ptr<Strategy>> s = CreateStrategy(r);
      if (s.ok() && (*s)->JoinsUnnamed(view)) {
        names.push_back(r);
        changed = true;
      }
    }
    for (size_t i = 0; i < names.size(); ++i) {
      absl::StatusOr<std::unique_ptr<Strategy>> s = CreateStrategy(names[i]);
      if (!s.ok()) continue;
      for (const std::string& implied : (*s)->Implies(view)) {
        if (Contains(names, implied)) continue;
        WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Strategy> t, CreateStrategy(implied));
        if (view.HasPhase(t->Phase())) continue;
        names.push_back(implied);
        changed = true;
      }
    }
    if (!changed) return absl::OkStatus();
  }
  return Internal("strategies keep joining the plan", "JoinsUnnamed and Implies that settle");
}

}  // namespace

absl::StatusOr<std::map<std::string, int>> ParseMeshAxes(const std::string& list) {
  std::map<std::string, int> out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    std::vector<std::string> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    int size = 0;
    if (kv.size() != 2 || absl::StripAsciiWhitespace(kv[0]).empty() ||
        !absl::SimpleAtoi(kv[1], &size) || size < 1) {
      return InvalidArgument(absl::StrCat("'", part, "' in --mesh_axes='", list, "'"),
                             "name=size pairs with sizes >= 1, separated by commas",
                             "e.g. --mesh_axes=my_axis=2");
    }
    if (!out.emplace(std::string(absl::StripAsciiWhitespace(kv[0])), size).second) {
      return InvalidArgument(absl::StrCat("axis '", kv[0], "' is given twice in --mesh_axes"),
                             "each axis once");
    }
  }
  return out;
}

int PlanView::AxisSize(const std::string& axis) const {
  if (mesh_ != nullptr) return axis == "ep" ? mesh_->ep() : mesh_->size(axis);
  const comm::MeshSizes& m = request_->mesh;
  int requested = 1;
  if (axis == "pp") requested = m.pp;
  if (axis == "dp_replicate") requested = m.dp_replicate;
  if (axis == "dp_shard") requested = m.dp_shard;
  if (axis == "cp") requested = m.cp;
  if (axis == "tp") requested = m.tp;
  if (axis == "ep") requested = m.ep;
  auto it = request_->own_axes.find(axis);
  if (it != request_->own_axes.end()) requested = it->second;
  return requested > 0 ? requested : 1;
}

bool PlanView::HasPhase(StrategyPhase phase) const {
  return std::any_of(names_->begin(), names_->end(), [&](const std::string& n) {
    absl::StatusOr<std::unique_ptr<Strategy>> s = CreateStrategy(n);
    return s.ok() && (*s)->Phase() == phase;
  });
}

bool PlanView::Switch(const std::string& name) const {
  auto it = request_->switches.find(name);
  return it != request_->switches.end() && it->second;
}

absl::StatusOr<ParallelPlan> ParallelPlan::Resolve(const PlanRequest& request) {
  ParallelPlan plan;
  WEFT_ASSIGN_OR_RETURN(std::vector<std::string> names, ParseStrategyList(request.strategy));
  const bool named = !names.empty();

  comm::MeshSizes sizes = request.mesh;
  WEFT_ASSIGN_OR_RETURN(sizes.outer, OwnAxes(names, request.own_axes));
  absl::StatusOr<comm::TrainingMesh> shape =
      comm::TrainingMesh::Create(sizes, request.world_size);
  const PlanView view(&request, shape.ok() ? &*shape : nullptr, &names);
  WEFT_RETURN_IF_ERROR(AddJoinedAndImplied(view, names));

  if (request.world_size > 1) {
    // Ranks but nothing to split over them (--recompute alone works on none).
    const bool any_axes = std::any_of(names.begin(), names.end(), [](const std::string& n) {
      absl::StatusOr<std::unique_ptr<Strategy>> s = CreateStrategy(n);
      return s.ok() && !(*s)->RequiredAxes().empty();
    });
    if (!named && !any_axes) {
      // --tp alone names the axis, not the strategy: tp and sp both use it.
      const int tp = request.mesh.tp;
      const std::string hint =
          tp > 1 ? absl::StrCat("--tp=", tp, " takes effect with --strategy=tp or sp",
                                request.world_size > tp
                                    ? " plus a data-parallel strategy (e.g. tp,fsdp)"
                                    : "")
                 : "add --strategy=ddp (or fsdp, zero), or run a single process";
      return FailedPrecondition(
          absl::StrCat("this job has ", request.world_size, " ranks (", request.description,
                       ") but no --strategy"),
          "a strategy for every rank: data-parallel, or tp/sp over --tp", hint);
    }
  }
  plan.notes_ = UnreadFlagNotes(names, request.options);
  if (names.empty()) return plan;  // one process, nothing applied

  if (!shape.ok()) {
    return Annotate(shape.status(), absl::StrCat("the mesh of ", request.world_size, " ranks (",
                                                 request.description, ")"));
  }
  if (shape->ep() > 1) WEFT_RETURN_IF_ERROR(CheckAxisUsed(names, "ep", shape->ep()));
  WEFT_ASSIGN_OR_RETURN(OrderedStrategies ordered,
                        OrderAndValidate(names, request.options, &shape->layout()));
  for (const auto& s : ordered.strategies) plan.names_.push_back(s->Name());
  plan.options_ = std::move(ordered.options);
  plan.mesh_ = *std::move(shape);
  return plan;
}

}  // namespace weft
