// Pipeline bubble per schedule: the idle fraction of each rank, measured by
// running the schedules' real timelines (strategies/pp/pipeline_schedule.h)
// on CPU threads, one per pipeline rank, with equal-cost stages. Each action
// takes its cost (a sleep, so ranks need no core each) after waiting for the
// actions it depends on (the previous
// stage's F, the next stage's B, its own F before B and B before W), so
// waiting is the bubble. Printed beside the simulator's figure and the
// textbook formula, with peak_held: the most micro-batches whose activations
// the busiest rank held at once (interleaved: micro-batch chunks, each 1/v of
// the rank's layers).
//
//   bazel run -c opt //tools/bench:pp_bubble -- [--pp=4] [--micro=4,8,16] [--unit_us=2000]
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "strategies/pp/pipeline_schedule.h"
#include "strategies/pp/schedule_simulator.h"
#include "tools/bench/bench_flags.h"

ABSL_FLAG(int, pp, 4, "pipeline ranks (threads)");
ABSL_FLAG(std::string, micro, "4,8,16", "micro-batches per step, comma-separated");
ABSL_FLAG(int, virtual_stages, 2, "chunks per rank for the interleaved schedule");
ABSL_FLAG(double, unit_us, 2000, "microseconds one forward of one full rank's layers takes");
ABSL_FLAG(int, repeats, 3, "runs per case; the lowest bubble is printed (least OS noise)");

namespace weft::pp {
namespace {

using Clock = std::chrono::steady_clock;

// Done-ness of (kind, micro, virtual stage) shared by the rank threads.
class Board {
 public:
  void Done(PipeAction::Kind k, int micro, int vs) {
    std::lock_guard<std::mutex> lock(mu_);
    done_[{static_cast<int>(k), micro, vs}] = true;
    cv_.notify_all();
  }
  void Await(PipeAction::Kind k, int micro, int vs) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_.count({static_cast<int>(k), micro, vs}) > 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::tuple<int, int, int>, bool> done_;
};

void Work(double us) {
  std::this_thread::sleep_for(std::chrono::nanoseconds(static_cast<int64_t>(us * 1000)));
}

struct Measured {
  double bubble = 0;  // mean over ranks of idle / makespan
};

// Runs `timeline` with one thread per rank; costs per chunk as the simulator's.
Measured Execute(const Timeline& timeline, const PipelineShape& shape, bool split, double unit_us) {
  const ActionCosts costs;
  const double per_chunk = unit_us / shape.chunks;
  Board board;
  std::vector<double> busy_us(shape.stages, 0);
  std::vector<Clock::time_point> first(shape.stages), last(shape.stages);
  const int vss = shape.virtual_stages();
  auto run_rank = [&](int r) {
    first[r] = Clock::now();
    for (const PipeAction& a : timeline[r]) {
      const int vs = a.chunk * shape.stages + r;
      double cost = costs.forward;
      if (a.kind == PipeAction::Kind::kForward) {
        if (vs > 0) board.Await(PipeAction::Kind::kForward, a.micro, vs - 1);
      } else if (a.kind == PipeAction::Kind::kBackward) {
        if (vs < vss - 1) board.Await(PipeAction::Kind::kBackward, a.micro, vs + 1);
        cost = split ? costs.backward_input : costs.backward;
      } else {
        cost = costs.weight;
      }
      const auto t0 = Clock::now();
      Work(cost * per_chunk);
      busy_us[r] += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      board.Done(a.kind, a.micro, vs);
    }
    last[r] = Clock::now();
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < shape.stages; ++r) threads.emplace_back(run_rank, r);
  for (auto& t : threads) t.join();
  const auto begin = *std::min_element(first.begin(), first.end());
  const auto end = *std::max_element(last.begin(), last.end());
  const double makespan = std::chrono::duration<double, std::micro>(end - begin).count();
  Measured m;
  for (int r = 0; r < shape.stages; ++r) m.bubble += 1.0 - busy_us[r] / makespan;
  m.bubble /= shape.stages;
  return m;
}

int Main() {
  const int p = absl::GetFlag(FLAGS_pp);
  const int v = absl::GetFlag(FLAGS_virtual_stages);
  std::vector<int> micros;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_micro), ',')) {
    int m = 0;
    if (!absl::SimpleAtoi(s, &m) || m < 1) {
      std::fprintf(stderr, "--micro=%s: expected positive integers\n", std::string(s).c_str());
      return 2;
    }
    micros.push_back(m);
  }
  std::printf("pp=%d ranks as threads, F=1 B=2 (split: B=1 W=1) units of %.0f us\n", p,
              absl::GetFlag(FLAGS_unit_us));
  std::printf("%-12s %4s %10s %10s %10s %10s\n", "schedule", "m", "formula", "simulated", "measured",
              "peak_held");
  for (int m : micros) {
    for (const std::string name : {"gpipe", "1f1b", "interleaved", "zbh1"}) {
      auto schedule = MakePipelineSchedule(name);
      const PipelineShape shape{p, name == "interleaved" ? v : 1, m};
      auto timeline = (*schedule)->Build(shape);
      if (!timeline.ok()) {
        std::printf("%-12s %4d  %s\n", name.c_str(), m, timeline.status().ToString().c_str());
        continue;
      }
      const bool split = (*schedule)->SplitsBackward();
      auto sim = Simulate(*timeline, shape, split);
      if (!sim.ok()) {
        std::printf("%-12s %4d  %s\n", name.c_str(), m, sim.status().ToString().c_str());
        continue;
      }
      Measured best{1.0};
      for (int i = 0; i < absl::GetFlag(FLAGS_repeats); ++i) {
        const Measured r = Execute(*timeline, shape, split, absl::GetFlag(FLAGS_unit_us));
        best.bubble = std::min(best.bubble, r.bubble);
      }
      const int chunks = shape.chunks;
      std::string formula = "-";
      if (name != "zbh1") {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.3f",
                      static_cast<double>(p - 1) / (chunks * m + p - 1));
        formula = buf;
      }
      std::printf("%-12s %4d %10s %10.3f %10.3f %10d\n",
                  (name == "interleaved" ? "interleaved" + std::to_string(v) : name).c_str(), m,
                  formula.c_str(), sim->bubble_fraction, best.bubble,
                  *std::max_element(sim->peak_in_flight.begin(), sim->peak_in_flight.end()));
    }
  }
  return 0;
}

}  // namespace
}  // namespace weft::pp

int main(int argc, char** argv) {
  weft::bench::ParseBenchmarkFlags(
      argc, argv,
      "Pipeline bubble per schedule (gpipe, 1f1b, interleaved, zbh1) and micro-batch count:\n"
      "the formula, the simulator, and measured on --pp rank threads.\n"
      "usage: pp_bubble [--pp=N] [--micro=4,8,16] [--virtual_stages=V] [--repeats=R]");
  using weft::bench::RequireFlag;
  RequireFlag(absl::GetFlag(FLAGS_pp) >= 2, absl::StrCat("pp=", absl::GetFlag(FLAGS_pp)),
              "at least 2 pipeline ranks");
  RequireFlag(absl::GetFlag(FLAGS_repeats) >= 1,
              absl::StrCat("repeats=", absl::GetFlag(FLAGS_repeats)), "at least 1");
  RequireFlag(absl::GetFlag(FLAGS_virtual_stages) >= 1,
              absl::StrCat("virtual_stages=", absl::GetFlag(FLAGS_virtual_stages)), "at least 1");
  RequireFlag(absl::GetFlag(FLAGS_unit_us) > 0,
              absl::StrCat("unit_us=", absl::GetFlag(FLAGS_unit_us)), "a positive time");
  return weft::pp::Main();
}
