#include "strategies/pp/schedule_simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"

namespace weft::pp {
namespace {

using Kind = PipeAction::Kind;
// (virtual stage, kind, micro) -> end time.
using Done = std::map<std::tuple<int, int, int>, double>;

int VirtualStage(const PipelineShape& s, int rank, int chunk) { return chunk * s.stages + rank; }

// The end times this action waits for, or false when one has not run yet.
bool Ready(const PipelineShape& s, const Done& done, int rank, const PipeAction& a, double* after) {
  const int vs = VirtualStage(s, rank, a.chunk), last = s.virtual_stages() - 1;
  std::vector<std::tuple<int, int, int>> deps;
  switch (a.kind) {
    case Kind::kForward:
      if (vs > 0) deps.push_back({vs - 1, static_cast<int>(Kind::kForward), a.micro});
      break;
    case Kind::kBackward:
      deps.push_back({vs, static_cast<int>(Kind::kForward), a.micro});
      if (vs < last) deps.push_back({vs + 1, static_cast<int>(Kind::kBackward), a.micro});
      break;
    case Kind::kWeight:
      deps.push_back({vs, static_cast<int>(Kind::kBackward), a.micro});
      break;
  }
  for (const auto& d : deps) {
    auto it = done.find(d);
    if (it == done.end()) return false;
    *after = std::max(*after, it->second);
  }
  return true;
}

double Cost(const ActionCosts& c, Kind k, bool split) {
  if (k == Kind::kForward) return c.forward;
  if (k == Kind::kWeight) return c.weight;
  return split ? c.backward_input : c.backward;
}

}  // namespace

absl::StatusOr<Simulation> Simulate(const Timeline& timeline, const PipelineShape& shape,
                                    bool split, const ActionCosts& costs) {
  const int p = static_cast<int>(timeline.size());
  Simulation sim;
  sim.peak_in_flight.assign(p, 0);
  std::vector<size_t> next(p, 0);
  std::vector<double> free_at(p, 0.0);
  std::vector<int> in_flight(p, 0);
  Done done;
  const Kind releases = split ? Kind::kWeight : Kind::kBackward;
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < p; ++r) {
      // Run every action of rank r that is ready, in its order.
      while (next[r] < timeline[r].size()) {
        const PipeAction& a = timeline[r][next[r]];
        double start = free_at[r];
        if (!Ready(shape, done, r, a, &start)) break;
        const double end = start + Cost(costs, a.kind, split);
        done[{VirtualStage(shape, r, a.chunk), static_cast<int>(a.kind), a.micro}] = end;
        sim.actions.push_back({r, a, start, end});
        free_at[r] = end;
        ++next[r];
        progress = true;
        if (a.kind == Kind::kForward) ++in_flight[r];
        if (a.kind == releases) --in_flight[r];
        sim.peak_in_flight[r] = std::max(sim.peak_in_flight[r], in_flight[r]);
      }
    }
  }
  std::vector<std::string> stuck;
  for (int r = 0; r < p; ++r) {
    if (next[r] < timeline[r].size()) {
      stuck.push_back(absl::StrCat("rank ", r, " at ",
                                   timeline[r][next[r]].ToString(shape.chunks > 1)));
    }
  }
  if (!stuck.empty()) {
    return FailedPrecondition(absl::StrCat("the schedule deadlocks: ", absl::StrJoin(stuck, ", ")),
                              "each action's inputs produced earlier in some rank's order");
  }
  for (double t : free_at) sim.makespan = std::max(sim.makespan, t);
  for (const TimedAction& t : sim.actions) {
    if (t.rank == 0) sim.busy += t.end - t.start;
  }
  sim.bubble_fraction = sim.makespan > 0 ? 1.0 - sim.busy / sim.makespan : 0.0;
  return sim;
}

std::string TextChart(const Simulation& sim, int ranks, double unit) {
  const int width = static_cast<int>(std::ceil(sim.makespan / unit));
  std::vector<std::string> rows(ranks, std::string(width, '.'));
  for (const TimedAction& t : sim.actions) {
    const char c = t.action.kind == PipeAction::Kind::kForward ? 'F'
                   : t.action.kind == PipeAction::Kind::kBackward ? 'B'
                                                                  : 'W';
    for (int i = static_cast<int>(t.start / unit); i < static_cast<int>(std::ceil(t.end / unit)); ++i) {
      rows[t.rank][i] = i == static_cast<int>(t.start / unit) ? c : static_cast<char>(std::tolower(c));
    }
  }
  std::string out;
  for (int r = 0; r < ranks; ++r) absl::StrAppend(&out, "rank ", r, " |", rows[r], "|\n");
  return out;
}

std::string ChromeTrace(const Simulation& sim, const std::string& schedule_name,
                        double us_per_unit) {
  std::vector<std::string> events;
  for (const TimedAction& t : sim.actions) {
    events.push_back(absl::StrFormat(
        R"({"name":"%s","cat":"%s","ph":"X","pid":0,"tid":%d,"ts":%.3f,"dur":%.3f,)"
        R"("args":{"micro":%d,"chunk":%d}})",
        t.action.ToString(true), schedule_name, t.rank, t.start * us_per_unit,
        (t.end - t.start) * us_per_unit, t.action.micro, t.action.chunk));
  }
  return absl::StrCat(R"({"displayTimeUnit":"ms","traceEvents":[)", absl::StrJoin(events, ","),
                      "]}\n");
}

}  // namespace weft::pp
