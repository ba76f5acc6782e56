// The memory planner behind --strategy=auto: every layout of a GPT job on
// N ranks (layouts.h), each estimated at its worst rank by a dry run of the
// job (core/runtime/memory_estimate.h) at the micro-batch that keeps the
// job's global batch, and the first, in order of communication, that fits
// a per-rank budget. //tools:estimate prints them all; //models/gpt:train
// with --strategy=auto --memory_budget=B trains the pick.
#ifndef WEFT_TOOLS_ESTIMATE_PLANNER_H_
#define WEFT_TOOLS_ESTIMATE_PLANNER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/runtime/memory_estimate.h"
#include "models/gpt/gpt_config.pb.h"
#include "tools/estimate/layouts.h"

namespace weft {

// `job` on `nproc` ranks: rank `rank`, or (rank < 0) every pipeline stage
// of rank 0's pipeline (one estimate without pp).
absl::StatusOr<std::vector<MemoryEstimate>> EstimateJob(const GptJob& job, int nproc, int rank);

struct LayoutEstimate {
  Layout layout;
  int micro_batch = 0;  // 0: no micro-batch splits the global batch
  absl::Status status;  // not OK: the job does not admit the layout, and why
  MemoryEstimate worst;
};

// Every candidate layout of `nproc` ranks, in order of communication.
std::vector<LayoutEstimate> EstimateLayouts(const GptJob& job, int nproc);

// The first estimate that is admitted and whose worst rank's peak fits
// `budget` bytes; an error naming the smallest peak when none does.
absl::StatusOr<LayoutEstimate> PickLayout(const std::vector<LayoutEstimate>& estimates,
                                          int64_t budget);

// `job` with the layout and micro-batch of `pick`.
GptJob WithLayout(const GptJob& job, const LayoutEstimate& pick);

// --strategy=auto for training: `job` on `nproc` ranks, planned against its
// --memory_budget (required). Returns the job to train and, in *summary, a
// line saying what was picked and why.
absl::StatusOr<GptJob> PlanAutoLayout(const GptJob& job, int nproc, std::string* summary);

}  // namespace weft

#endif  // WEFT_TOOLS_ESTIMATE_PLANNER_H_
