// The memory estimate of one rank of a GPT job, as the estimator tests
// compare it with measured runs: the job's own steps, on `world` ranks.
#ifndef WEFT_TESTS_ESTIMATE_RANK_H_
#define WEFT_TESTS_ESTIMATE_RANK_H_

#include <utility>

#include "core/runtime/memory_estimate.h"
#include "tests/tiny_gpt.h"

namespace weft::testing {

inline absl::StatusOr<MemoryEstimate> EstimateRank(const GptJob& job, int world, int rank = 0,
                                                   bool moe_routing_bound = false) {
  MemoryEstimateOptions o;
  o.moe_routing_bound = moe_routing_bound;
  o.job = GptTrainerOptions(job);
  o.world_size = world;
  o.rank = rank;
  o.steps = static_cast<int>(job.train().steps());
  return EstimateMemory(std::move(o));
}

}  // namespace weft::testing

#endif  // WEFT_TESTS_ESTIMATE_RANK_H_
