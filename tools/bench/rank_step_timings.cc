#include "tools/bench/rank_step_timings.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "comm/testing/multiprocess.h"
#include "core/base/status_macros.h"
#include "tests/tiny_gpt.h"

namespace weft::bench {

absl::StatusOr<StepTimings> TimeRankSteps(const GptJob& job, int world,
                                          const std::string& wait_metric, const std::string& tag,
                                          int warmup) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  // Ranks are processes: rank 0 writes its timings to a file, read here.
  const std::string out = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", tag, "_steps.txt");
  auto results = comm::testing::RunRanks(
      comm::testing::RankMode::kProcesses, world,
      [&](const comm::testing::RankContext& rc) -> absl::Status {
        JobTopology topo;
        topo.rank = rc.rank;
        topo.world_size = rc.world_size;
        topo.store = rc.store;
        WEFT_ASSIGN_OR_RETURN(auto trainer, testing::MakeGptTrainer(job, topo));
        StepTimings mine;
        for (int i = 0; i < job.train().steps(); ++i) {
          WEFT_ASSIGN_OR_RETURN(StepStats s, trainer->TrainStep());
          double wait = 0;
          for (const auto& [k, v] : s.extra) {
            if (k == wait_metric) wait = v;
          }
          if (i < warmup) continue;
          mine.step_ms.push_back(s.step_ms);
          mine.wait_ms.push_back(wait);
        }
        if (rc.rank == 0) {  // after the steps: no file I/O inside the timed loop
          std::ofstream f(out);
          for (size_t i = 0; i < mine.step_ms.size(); ++i) {
            f << mine.step_ms[i] << " " << mine.wait_ms[i] << "\n";
          }
        }
        return absl::OkStatus();
      },
      {.deadline = absl::Minutes(10), .timeout = absl::Seconds(120)});
  WEFT_RETURN_IF_ERROR(comm::testing::AllRanksOk(results));
  StepTimings t;
  std::ifstream in(out);
  double a, b;
  while (in >> a >> b) {
    t.step_ms.push_back(a);
    t.wait_ms.push_back(b);
  }
  if (t.step_ms.empty()) {
    return absl::InternalError(absl::StrCat("no steps measured: ", job.train().steps(),
                                            " steps with ", warmup, " of warm-up"));
  }
  return t;
}

void Append(StepTimings& a, const StepTimings& b) {
  a.step_ms.insert(a.step_ms.end(), b.step_ms.begin(), b.step_ms.end());
  a.wait_ms.insert(a.wait_ms.end(), b.wait_ms.begin(), b.wait_ms.end());
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace weft::bench
