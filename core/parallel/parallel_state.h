// ParallelState: how this process takes part in a job, as the trainer needs
// it: its data-parallel coordinates, the mesh, and what the applied
// strategies handed back (their StrategyResults, folded in application
// order by the composer). Strategies never write it: they read the part
// earlier strategies produced through StrategyContext::applied.
// A single process is dp_rank 0 of dp_size 1 with no participants.
#ifndef WEFT_CORE_PARALLEL_PARALLEL_STATE_H_
#define WEFT_CORE_PARALLEL_PARALLEL_STATE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/device_mesh/device_mesh.h"
#include "core/nn/parameter.h"
#include "core/nn/stage.h"
#include "core/parallel/option_schema.h"
#include "core/parallel/step_participant.h"
#include "core/parallel/step_schedule.h"
#include "core/parallel/strategy_result.h"

namespace weft {

struct ParallelState {
  int world_rank = 0;
  int world_size = 1;
  int dp_rank = 0;   // which slice of every global batch this rank loads
  int dp_size = 1;   // ranks that split each global batch
  // The job's device mesh (null for a single process).
  std::shared_ptr<comm::DeviceMesh> mesh;
  // The model-parallel (tp) group gradient norms sum sharded parameters
  // over; null when the mesh has no such axis of size > 1.
  std::shared_ptr<comm::ProcessGroup> model_parallel;

  // Folded from the strategies' results, in application order.
  std::vector<std::unique_ptr<StepParticipant>> participants;
  // Strategies applied, in order, for the log ("ddp", "fsdp", ...), and
  // their options as the job resolved them (--strategy_options over the
  // convenience flags over the defaults), in the same order.
  std::vector<std::string> strategy_names;
  std::vector<StrategyOptionSet> strategy_options;
  std::vector<std::string> notes;  // startup log lines
  // Applied strategies after which a rank no longer holds every parameter
  // whole (Strategy::KeepsParametersWhole), and whether every applied one
  // allows a captured step (Strategy::CapturableInStepGraph).
  std::vector<std::string> sharding_strategies;
  bool step_graph_capturable = true;
  std::shared_ptr<const StepSchedule> step_schedule;  // null: the trainer's
  // The stage boundaries every applied strategy's StageBoundaryFn gives,
  // chained; null: unchanged. A pipeline checks what it receives against
  // it, and a dry run allocates it.
  StageBoundaryFn stage_boundary;
  // Exported pieces are numbered replica * replica_copies + replica_copy,
  // so exactly one copy of each is replica 0 (the one checkpoints write).
  int replica_copies = 1;
  int replica_copy = 0;
  bool grad_norm_sums_dp_shard = false;  // StrategyResult's
  // Groups the logged loss is summed over: the data-parallel ranks (set up
  // with the mesh), then each strategy's loss_group.
  std::vector<std::shared_ptr<comm::ProcessGroup>> loss_groups;
  // Keeps communication objects alive for the job (process groups, mesh).
  std::vector<std::shared_ptr<void>> keep_alive;

  // Sums a one-element f32 device tensor over loss_groups, in place (losses
  // for logging), ordered on the given stream (the stream that produced the
  // tensor; it waits for the result), so the caller's host read is the one
  // host wait. OK and unchanged when there are none.
  absl::Status SumLoss(Tensor& t, NativeStream stream) const;
  bool sums_loss() const { return !loss_groups.empty(); }
};

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_PARALLEL_STATE_H_
