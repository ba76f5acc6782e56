// The memory planner behind --strategy=auto: every layout of a job (a GPT's
// or a Llama's: PlannerJob) on N ranks (layouts.h), each estimated at its worst rank by a dry run of the
// job (core/runtime/memory_estimate.h) at the micro-batch that keeps the
// job's global batch, and the first, in order of communication, that fits
// a per-rank budget. When none fits as the job is, the planner trades
// compute for memory in steps, cheapest first, until one does (PlanLayouts).
// //tools:estimate prints what it tried; //models/gpt:train with
// --strategy=auto --memory_budget=B trains the pick.
#ifndef WEFT_TOOLS_ESTIMATE_PLANNER_H_
#define WEFT_TOOLS_ESTIMATE_PLANNER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/runtime/memory_estimate.h"
#include "core/runtime/trainer.h"
#include "data/data.h"
#include "models/gpt/gpt_config.pb.h"
#include "models/llama/llama_config.pb.h"
#include "tools/estimate/layouts.h"

namespace weft {

// What the planner needs of a job, whatever its model: the train config it
// varies, the model's experts (layouts with ep), and how to build the job's
// data and model for a dry run under a given train config.
struct PlannerJob {
  TrainConfig train;
  int experts = 0;  // experts per MoE layer; 0: a dense model
  float capacity_factor = 0;
  std::function<absl::StatusOr<std::shared_ptr<TrainJob>>(
      const TrainConfig& train, std::shared_ptr<data::TextSourceCache> text_cache)>
      make_job;
};
PlannerJob GptPlannerJob(const GptJob& job);
PlannerJob LlamaPlannerJob(const LlamaJob& job);

// The functions below take a PlannerJob; the GptJob overloads are the same
// through GptPlannerJob.

// `job` on `nproc` ranks: rank `rank`, or (rank < 0) every pipeline stage
// of rank 0's pipeline (one estimate without pp). MoE layers route balanced,
// or at their bound (MemoryEstimateOptions::moe_routing_bound), as the
// planner's layouts do.
// `text_cache` (may be null) keeps the job's tokenized text between the
// estimates that share it.
absl::StatusOr<std::vector<MemoryEstimate>> EstimateJob(
    const PlannerJob& job, int nproc, int rank, bool moe_routing_bound = false,
    std::shared_ptr<data::TextSourceCache> text_cache = nullptr);
absl::StatusOr<std::vector<MemoryEstimate>> EstimateJob(
    const GptJob& job, int nproc, int rank, bool moe_routing_bound = false,
    std::shared_ptr<data::TextSourceCache> text_cache = nullptr);

struct LayoutEstimate {
  Layout layout;
  int micro_batch = 0;  // 0: no micro-batch splits the global batch
  // The recompute policy the planner added ("attention" or "full"); empty:
  // the job's own setting.
  std::string recompute;
  absl::Status status;  // not OK: the job does not admit the layout, and why
  MemoryEstimate worst;
};

// Every candidate layout of `nproc` ranks, in order of communication, at
// the largest micro-batch that keeps the global batch; with `recompute`
// ("attention" or "full") the planner's recompute added to the job.
// The text is tokenized once (in `text_cache` when given).
std::vector<LayoutEstimate> EstimateLayouts(
    const PlannerJob& job, int nproc, const std::string& recompute = "",
    std::shared_ptr<data::TextSourceCache> text_cache = nullptr);
std::vector<LayoutEstimate> EstimateLayouts(
    const GptJob& job, int nproc, const std::string& recompute = "",
    std::shared_ptr<data::TextSourceCache> text_cache = nullptr);

// The first estimate that is admitted and whose worst rank's peak fits
// `budget` bytes; an error naming the smallest peak when none does, with
// `hint` (default: the knobs that lower memory).
absl::StatusOr<LayoutEstimate> PickLayout(const std::vector<LayoutEstimate>& estimates,
                                          int64_t budget, const std::string& hint = "");

// What PlanLayouts tried and chose.
struct Plan {
  std::vector<LayoutEstimate> tried;     // in the order tried
  absl::StatusOr<LayoutEstimate> pick = absl::UnknownError("not planned");
  std::string relaxed;                   // what the pick needed beyond the job as given
};

// The planner. Steps, each over the layouts in order of communication,
// until one fits `budget`:
//   1. the job as given;
//   2. selective recompute (the attention core re-runs in backward: the
//      T x T scores are never kept; a few percent more compute);
//   3. full recompute (each TransformerBlock keeps only its input; about a
//      third more compute);
//   4. full recompute and smaller micro-batches: each layout at the
//      largest smaller micro-batch that keeps the global batch and fits
//      (more accumulation steps; small ones use a GPU less well).
// A job that sets --recompute itself keeps its own policy: steps 2 and 3
// are skipped, step 4 runs with its setting.
Plan PlanLayouts(const PlannerJob& job, int nproc, int64_t budget);
Plan PlanLayouts(const GptJob& job, int nproc, int64_t budget);

// `train` with the layout, micro-batch and recompute of `pick`.
TrainConfig WithLayout(const TrainConfig& train, const LayoutEstimate& pick);
GptJob WithLayout(const GptJob& job, const LayoutEstimate& pick);

// The training flags that select `pick` on top of `train`, e.g.
// "--strategy=zero --zero_stage=3 --micro_batch=2 --recompute".
std::string PickFlags(const TrainConfig& train, const LayoutEstimate& pick);
std::string PickFlags(const GptJob& job, const LayoutEstimate& pick);

// OK unless --strategy lists auto with other strategies, or gives
// --memory_budget without auto (it only feeds auto's plan).
absl::Status CheckAutoFlags(const ParallelConfig& parallel);

// OK unless `parallel` sets a mesh axis (--pp, --cp, --tp, --ep,
// --dp_replicate, --dp_shard) that --strategy=auto would overwrite with its
// own pick; the error names them.
absl::Status CheckAutoAxes(const ParallelConfig& parallel);

// --strategy=auto for training: `job` on `nproc` ranks, planned against its
// --memory_budget (required). Returns the job to train and, in *summary, a
// line saying what was picked and why.
absl::StatusOr<TrainConfig> PlanAutoLayout(const PlannerJob& job, int nproc,
                                           std::string* summary);
absl::StatusOr<GptJob> PlanAutoLayout(const GptJob& job, int nproc, std::string* summary);

}  // namespace weft

#endif  // WEFT_TOOLS_ESTIMATE_PLANNER_H_
