// ParallelPlan: the job's parallel layout, resolved once from the flags and
// the world size, immutable after, and read by everyone else (in the spirit
// of torchtitan's ParallelDims): the mesh degrees, the strategies in the
// order they are applied, and each strategy's options.
//
// Resolve() decides, in this order:
//   1. the strategies --strategy names;
//   2. the mesh: comm::TrainingMesh's axes [pp, dp_replicate, dp_shard, cp,
//      tp] (0: the ranks the others leave) with ep carved from dp_shard x
//      cp, and outermost the axes strategies declare as their own
//      (Strategy::RequiredAxes), sized by --mesh_axes=name=size,...;
//   3. the strategies that join without being named (Strategy::JoinsUnnamed,
//      e.g. pp when the pp axis has ranks) and those the plan's strategies
//      imply (Strategy::Implies, e.g. expert's ddp), until nothing changes;
//   4. the application order (ApplicationOrder in composer.h);
//   5. each strategy's options, the mesh axes against the strategies, and
//      every strategy's Validate, before anything is applied.
// No strategy name is spelled here: strategies declare their own place.
#ifndef WEFT_CORE_PARALLEL_PARALLEL_PLAN_H_
#define WEFT_CORE_PARALLEL_PARALLEL_PLAN_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/device_mesh/training_mesh.h"
#include "core/parallel/option_schema.h"
#include "core/parallel/strategy.h"
#include "core/parallel/strategy_options.h"

namespace weft {

// What the job asks for, before anything is resolved.
struct PlanRequest {
  std::string strategy;  // --strategy: comma-separated names
  comm::MeshSizes mesh;  // --pp, --dp_replicate, --dp_shard, --cp, --tp, --ep
  // --mesh_axes: sizes of the axes strategies declare as their own.
  std::map<std::string, int> own_axes;
  StrategyOptionValues options;  // --strategy_options and convenience flags
  // Job switches a strategy may join on (--recompute).
  std::map<std::string, bool> switches;
  int world_size = 1;
  // "4 ranks (torchrun)": names the job in errors.
  std::string description;
};

// "name=size,..." (--mesh_axes) into sizes; errors name the bad part.
absl::StatusOr<std::map<std::string, int>> ParseMeshAxes(const std::string& list);

// What a strategy sees of a plan being resolved (JoinsUnnamed, Implies).
class PlanView {
 public:
  int world_size() const { return request_->world_size; }
  // The axis's resolved size (ep too), or its requested one when the sizes
  // do not resolve (the plan then fails with the mesh's error); 1 if unset.
  int AxisSize(const std::string& axis) const;
  bool HasPhase(StrategyPhase phase) const;
  bool Switch(const std::string& name) const;

 private:
  friend class ParallelPlan;
  PlanView(const PlanRequest* request, const comm::TrainingMesh* mesh,
           const std::vector<std::string>* names)
      : request_(request), mesh_(mesh), names_(names) {}
  const PlanRequest* request_;
  const comm::TrainingMesh* mesh_;  // null when the sizes do not resolve
  const std::vector<std::string>* names_;
};

class ParallelPlan {
 public:
  static absl::StatusOr<ParallelPlan> Resolve(const PlanRequest& request);

  // Null when no strategy is applied (a single process).
  const comm::TrainingMesh* mesh() const { return mesh_ ? &*mesh_ : nullptr; }
  // In application order, with their resolved options (parallel vectors).
  const std::vector<std::string>& strategies() const { return names_; }
  const std::vector<StrategyOptionSet>& options() const { return options_; }
  // Notes for the startup log (a convenience flag no strategy reads).
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  ParallelPlan() = default;
  std::optional<comm::TrainingMesh> mesh_;
  std::vector<std::string> names_;
  std::vector<StrategyOptionSet> options_;
  std::vector<std::string> notes_;
};

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_PARALLEL_PLAN_H_
