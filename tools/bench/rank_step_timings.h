// Step timings of a GPT job run as N gloo ranks (forked processes on
// loopback), for the overlap benchmarks: rank 0's step time and one
// communication-wait metric per step, after warm-up.
#ifndef WEFT_TOOLS_BENCH_RANK_STEP_TIMINGS_H_
#define WEFT_TOOLS_BENCH_RANK_STEP_TIMINGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/gpt/gpt_config.pb.h"

namespace weft::bench {

struct StepTimings {
  std::vector<double> step_ms;
  std::vector<double> wait_ms;  // the StepStats extra named `wait_metric` (0 when absent)
};

// Trains `job` on `world` ranks and returns rank 0's timings of every step
// after the first `warmup`. `tag` names the file rank 0 hands them back in.
absl::StatusOr<StepTimings> TimeRankSteps(const GptJob& job, int world,
                                          const std::string& wait_metric, const std::string& tag,
                                          int warmup = 2);

// Appends b's samples to a (rounds of the same mode pooled).
void Append(StepTimings& a, const StepTimings& b);

double Median(std::vector<double> v);

}  // namespace weft::bench

#endif  // WEFT_TOOLS_BENCH_RANK_STEP_TIMINGS_H_
