// Simulates a pipeline timeline with fixed action costs: when each action
// starts and ends given its dependencies (schedule order on its rank, the
// previous stage's F, the next stage's B). It finds deadlocks (an order no
// execution can follow), measures the bubble and the micro-batches each rank
// holds in flight, and renders the timeline as text or a Chrome trace.
#ifndef WEFT_STRATEGIES_PP_SCHEDULE_SIMULATOR_H_
#define WEFT_STRATEGIES_PP_SCHEDULE_SIMULATOR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "strategies/pp/pipeline_schedule.h"

namespace weft::pp {

// Costs of one action on one chunk (a chunk is 1/chunks of a rank's layers).
struct ActionCosts {
  double forward = 1;
  double backward = 2;        // a whole backward (input and weight gradients)
  double backward_input = 1;  // split schedules: B
  double weight = 1;          // split schedules: W
};

struct TimedAction {
  int rank = 0;
  PipeAction action;
  double start = 0, end = 0;
};

struct Simulation {
  std::vector<TimedAction> actions;  // in completion order
  double makespan = 0;
  double busy = 0;            // summed action time of one rank (all equal)
  double bubble_fraction = 0;  // 1 - busy / makespan
  // Most micro-batches a rank held at once: forward done, its last
  // backward part (W when split) not yet.
  std::vector<int> peak_in_flight;
};

// DeadlockError names the actions every rank is stuck on.
absl::StatusOr<Simulation> Simulate(const Timeline& timeline, const PipelineShape& shape,
                                    bool split, const ActionCosts& costs = {});

// One row per rank, one character per `unit` of time ('.' idle).
std::string TextChart(const Simulation& sim, int ranks, double unit = 1);

// Chrome/Perfetto trace JSON: one track (tid) per rank, an event per action.
std::string ChromeTrace(const Simulation& sim, const std::string& schedule_name,
                        double us_per_unit = 1000);

}  // namespace weft::pp

#endif  // WEFT_STRATEGIES_PP_SCHEDULE_SIMULATOR_H_
