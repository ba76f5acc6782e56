// ParallelState: how this process takes part in a job, as the trainer needs
// it: its data-parallel coordinates, the step participants of the applied
// strategies, and a way to sum a scalar over the data-parallel ranks.
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

namespace weft {

struct ParallelState {
  int world_rank = 0;
  int world_size = 1;
  int dp_rank = 0;   // which slice of every global batch this rank loads
  int dp_size = 1;   // ranks that split each global batch
  std::vector<std::unique_ptr<StepParticipant>> participants;
  // Sums a one-element f32 device tensor over the data-parallel ranks, in
  // place (losses for logging), ordered on the given stream (the stream that
  // produced the tensor; it waits for the result). Null when dp_size == 1.
  std::function<absl::Status(Tensor&, NativeStream)> dp_sum;
  // Strategies applied, in order, for the log ("ddp", "fsdp", ...).
  std::vector<std::string> strategy_names;
  // Lines for the startup log: what a strategy changed that the user should
  // know (tp padding a vocabulary it cannot split evenly).
  std::vector<std::string> notes;
  // The model-parallel (cp x tp) group gradient norms sum sharded
  // parameters over; null when the mesh has no such axis of size > 1.
  std::shared_ptr<comm::ProcessGroup> model_parallel;
  // Set by a data-parallel participant whose ReduceGradNormSq sums the
  // whole squared norm over dp_shard (fsdp, zero-3): earlier participants
  // must then hand it this rank's share, not a total over dp_shard (expert
  // weights the experts several ranks of dp_shard hold). Read at step time:
  // the data-parallel strategies are applied last.
  bool grad_norm_sums_dp_shard = false;
  // The job's device mesh (null for a single process).
  std::shared_ptr<comm::DeviceMesh> mesh;
  // The step's order of forwards and backwards when a strategy owns it (a
  // pipeline); null leaves it to the trainer (--step_schedule).
  std::shared_ptr<const StepSchedule> step_schedule;
  // Ranks that hold identical copies of what the optimizer updates, beyond
  // the data-parallel replicas (the ranks of one cp group): exported pieces
  // are numbered replica * replica_copies + replica_copy, so exactly one
  // copy of each is replica 0 (the one checkpoints write).
  int replica_copies = 1;
  int replica_copy = 0;
  // How strategies applied before a pipeline split change the tensors
  // between the model's stages from what Model::StageInput states (sp keeps
  // the residual stream on sequence shards); null: unchanged. A pipeline
  // checks what it receives against the result, and a dry run allocates it.
  std::function<absl::StatusOr<StageTensor>(const StageTensor&)> stage_boundary;
  // Keeps communication objects alive for the job (process groups, mesh).
  std::vector<std::shared_ptr<void>> keep_alive;
  // The applied strategies' options as the job resolved them
  // (--strategy_options over the convenience flags over the defaults), in
  // the order of strategy_names. Last, so plugins built against the
  // members above keep their offsets.
  std::vector<StrategyOptionSet> strategy_options;
};

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_PARALLEL_STATE_H_
