// The memory estimate of one rank of a GPT job (or of another model over
// its data), as the estimator tests
// compare it with measured runs: the job's own steps, on `world` ranks.
#ifndef WEFT_TESTS_ESTIMATE_RANK_H_
#define WEFT_TESTS_ESTIMATE_RANK_H_

#include <functional>
#include <memory>
#include <utility>

#include "core/runtime/memory_estimate.h"
#include "tests/tiny_gpt.h"

namespace weft::testing {

// `make_model`, when set, builds another model over the job's data (as
// RunOptions::make_model does for the measured run).
inline absl::StatusOr<MemoryEstimate> EstimateRank(
    const GptJob& job, int world, int rank = 0, bool moe_routing_bound = false,
    const FunctionJob::MakeModelFn& make_model = nullptr) {
  MemoryEstimateOptions o;
  o.moe_routing_bound = moe_routing_bound;
  o.trainer = GptTrainerOptions(job);
  if (make_model) o.trainer.job = WithModel(o.trainer.job, make_model);
  o.world_size = world;
  o.rank = rank;
  o.steps = static_cast<int>(job.train().steps());
  return EstimateMemory(std::move(o));
}

}  // namespace weft::testing

#endif  // WEFT_TESTS_ESTIMATE_RANK_H_
