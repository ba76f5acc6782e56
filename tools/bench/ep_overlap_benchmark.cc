// Does expert parallelism hide its token exchange behind the experts? Runs
// the same GPT-MoE training as N gloo ranks (forked processes on loopback,
// --ep=N) with and without overlap (ep_overlap: the experts compute this
// rank's own tokens while the all_to_all_v of the others is in flight, in
// forward and for the output gradients in backward), alternating the two
// modes --rounds times, and prints median step times and ep_a2a_wait_ms,
// the host time still spent waiting for those exchanges.
//
//   bazel run -c opt //tools/bench:ep_overlap -- [--world=2] [--steps=12]
//       [--n_layer=4] [--d_model=256] [--experts=8] [--rounds=2]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "comm/testing/multiprocess.h"
#include "core/base/status_macros.h"
#include "tests/tiny_gpt.h"

ABSL_FLAG(int, world, 2, "ranks (= ep)");
ABSL_FLAG(int, steps, 12, "steps per run (the first 2 are warmup)");
ABSL_FLAG(int, n_layer, 4, "layers, every one a mixture of experts");
ABSL_FLAG(int, d_model, 256, "width");
ABSL_FLAG(int, experts, 8, "experts per layer (top-2)");
ABSL_FLAG(int, seq_len, 64, "tokens per sample; 8 samples per rank");
ABSL_FLAG(int, rounds, 2, "with / without runs, alternated");

namespace weft {
namespace {

struct Samples {
  std::vector<double> step_ms, wait_ms;
};

absl::Status Run(bool overlap, Samples& into) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(dir));
  const int world = absl::GetFlag(FLAGS_world), t = absl::GetFlag(FLAGS_seq_len);
  job.mutable_train()->set_steps(absl::GetFlag(FLAGS_steps));
  job.mutable_train()->set_seq_len(t);
  job.mutable_train()->set_global_batch(8 * world);
  job.mutable_train()->set_micro_batch(8);
  GptConfig* m = job.mutable_model();
  m->set_n_layer(absl::GetFlag(FLAGS_n_layer));
  m->set_d_model(absl::GetFlag(FLAGS_d_model));
  m->set_n_head(4);
  m->set_max_seq_len(t);
  m->set_moe_every(1);
  m->set_num_experts(absl::GetFlag(FLAGS_experts));
  m->set_top_k(2);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_ep(world);
  p->set_strategy_options(overlap ? "ep_overlap=true" : "ep_overlap=false");
  const std::string out = absl::StrCat(dir, "/ep_overlap_", overlap, ".txt");
  auto results = comm::testing::RunRanks(
      comm::testing::RankMode::kProcesses, world,
      [&](const comm::testing::RankContext& rc) -> absl::Status {
        JobTopology topo;
        topo.rank = rc.rank;
        topo.world_size = rc.world_size;
        topo.store = rc.store;
        WEFT_ASSIGN_OR_RETURN(auto trainer, testing::MakeGptTrainer(job, topo));
        std::vector<std::pair<double, double>> steps;
        for (int i = 0; i < job.train().steps(); ++i) {
          WEFT_ASSIGN_OR_RETURN(StepStats s, trainer->TrainStep());
          double wait = 0;
          for (const auto& [k, v] : s.extra) {
            if (k == "ep_a2a_wait_ms") wait = v;
          }
          steps.push_back({s.step_ms, wait});
        }
        if (rc.rank == 0) {
          std::ofstream f(out);
          for (size_t i = 2; i < steps.size(); ++i) {
            f << steps[i].first << " " << steps[i].second << "\n";
          }
        }
        return absl::OkStatus();
      },
      {.deadline = absl::Minutes(10), .timeout = absl::Seconds(120)});
  WEFT_RETURN_IF_ERROR(comm::testing::AllRanksOk(results));
  std::ifstream in(out);
  double a, b;
  while (in >> a >> b) {
    into.step_ms.push_back(a);
    into.wait_ms.push_back(b);
  }
  if (into.step_ms.empty()) return absl::InternalError("no steps measured");
  return absl::OkStatus();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  weft::Samples with, without;
  for (int r = 0; r < absl::GetFlag(FLAGS_rounds); ++r) {
    for (bool overlap : {true, false}) {
      absl::Status s = weft::Run(overlap, overlap ? with : without);
      if (!s.ok()) {
        std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
        return 1;
      }
    }
  }
  std::printf("ep=%d on %d gloo ranks, GPT-MoE %dL d=%d, %d experts top-2, 8 x %d tokens/rank "
              "(medians of %zu steps after warmup)\n",
              absl::GetFlag(FLAGS_world), absl::GetFlag(FLAGS_world),
              absl::GetFlag(FLAGS_n_layer), absl::GetFlag(FLAGS_d_model),
              absl::GetFlag(FLAGS_experts), absl::GetFlag(FLAGS_seq_len), with.step_ms.size());
  std::printf("%-12s %10s %24s\n", "mode", "step_ms", "a2a wait (exposed) ms");
  std::printf("%-12s %10.1f %24.2f\n", "overlap", weft::Median(with.step_ms),
              weft::Median(with.wait_ms));
  std::printf("%-12s %10.1f %24.2f\n", "no overlap", weft::Median(without.step_ms),
              weft::Median(without.wait_ms));
  return 0;
}
