// Parallel setup, in the order the trainer needs it:
//   ResolveTopology  where this process sits: injected (tests) or read from
//                    the launcher's / torchrun's / Slurm's environment.
//   ResolvePlan      loads --plugin shared objects, then resolves the flags
//                    and the world size into the job's one ParallelPlan
//                    (core/parallel/parallel_plan.h).
//   InitParallel     the store, the plan's device mesh and the data-parallel
//                    coordinates from it: enough to shard the data.
//   ApplyStrategies  applies the plan's strategies to the materialized model.
#ifndef WEFT_CORE_RUNTIME_PARALLEL_SETUP_H_
#define WEFT_CORE_RUNTIME_PARALLEL_SETUP_H_

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "comm/device_mesh/training_mesh.h"
#include "comm/store/store.h"
#include "core/nn/model.h"
#include "core/parallel/parallel_plan.h"
#include "core/parallel/parallel_state.h"
#include "core/parallel/strategy.h"
#include "core/parallel/strategy_options.h"
#include "core/runtime/train_config.pb.h"

namespace weft {

struct JobTopology {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  bool multi_node = false;
  // Rendezvous store; null until InitParallel creates one from the env.
  std::shared_ptr<comm::Store> store;
  std::string description = "single process";
  // Who started the ranks, for the banner: "torchrun", "srun", "mpirun (Open MPI)"...
  std::string launcher = "single process";
};

absl::StatusOr<JobTopology> ResolveTopology(const std::optional<JobTopology>& injected);

// The mesh sizes the parallel flags ask for (0: the ranks the others leave).
comm::MeshSizes MeshSizesOf(const ParallelConfig& config);

// --strategy_options plus the convenience flags that were set.
absl::StatusOr<StrategyOptionValues> StrategyOptionsFromConfig(const ParallelConfig& config);

// The flags of `config` as a plan request for `topology`'s world.
absl::StatusOr<PlanRequest> PlanRequestFromConfig(const TrainConfig& config,
                                                  const JobTopology& topology);

// Loads --plugin, then resolves the plan (the one place flags become a layout).
absl::StatusOr<ParallelPlan> ResolvePlan(const TrainConfig& config, const JobTopology& topology);

// `observer` (may be null) sees every op of the mesh's groups. `job_text`
// (the job in protobuf text; empty skips the check) must agree with rank
// 0's on every rank (job_agreement.h).
absl::StatusOr<std::unique_ptr<ParallelState>> InitParallel(
    const ParallelPlan& plan, const ParallelConfig& config, JobTopology& topology,
    Device device, std::shared_ptr<comm::OpObserver> observer = nullptr,
    const std::string& job_text = "");

absl::Status ApplyStrategies(const ParallelPlan& plan, std::unique_ptr<Model>& model,
                             RunContext& ctx, Allocator* param_allocator,
                             Allocator* grad_allocator, DType grad_dtype, ParallelState& state);

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_PARALLEL_SETUP_H_
