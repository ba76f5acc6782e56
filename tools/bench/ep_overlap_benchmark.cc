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
#include <cstdio>
#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "tests/tiny_gpt.h"
#include "tools/bench/rank_step_timings.h"
#include "tools/bench/bench_flags.h"

ABSL_FLAG(int, world, 2, "ranks (= ep)");
ABSL_FLAG(int, steps, 12, "steps per run (the first 2 are warmup)");
ABSL_FLAG(int, n_layer, 4, "layers, every one a mixture of experts");
ABSL_FLAG(int, d_model, 256, "width");
ABSL_FLAG(int, experts, 8, "experts per layer (top-2)");
ABSL_FLAG(int, seq_len, 64, "tokens per sample; 8 samples per rank");
ABSL_FLAG(int, rounds, 2, "with / without runs, alternated");

namespace weft {
namespace {

absl::StatusOr<bench::StepTimings> Run(bool overlap) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(tmp != nullptr ? tmp : "/tmp"));
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
  return bench::TimeRankSteps(job, world, "ep_a2a_wait_ms", absl::StrCat("ep_overlap_", overlap));
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  weft::bench::ParseBenchmarkFlags(
      argc, argv,
      "Expert parallelism's all_to_all_v with and without overlap: a GPT-MoE on --world gloo\n"
      "ranks (ep = world).\nusage: ep_overlap [--world=N] [--experts=E] [--rounds=R]");
  using weft::bench::RequireFlag;
  const int world = absl::GetFlag(FLAGS_world), experts = absl::GetFlag(FLAGS_experts);
  RequireFlag(world >= 2, absl::StrCat("world=", world), "at least 2 ranks (ep = world)");
  RequireFlag(experts >= world && experts % world == 0, absl::StrCat("experts=", experts),
              absl::StrCat("a multiple of --world=", world, " (each rank holds experts/world)"));
  RequireFlag(absl::GetFlag(FLAGS_steps) > 2, absl::StrCat("steps=", absl::GetFlag(FLAGS_steps)),
              "more than the 2 warm-up steps");
  RequireFlag(absl::GetFlag(FLAGS_rounds) >= 1,
              absl::StrCat("rounds=", absl::GetFlag(FLAGS_rounds)), "at least 1");
  weft::bench::StepTimings with, without;
  for (int r = 0; r < absl::GetFlag(FLAGS_rounds); ++r) {
    for (bool overlap : {true, false}) {
      auto run = weft::Run(overlap);
      if (!run.ok()) {
        std::fprintf(stderr, "error: %s\n", run.status().ToString().c_str());
        return 1;
      }
      weft::bench::Append(overlap ? with : without, *run);
    }
  }
  std::printf("ep=%d on %d gloo ranks, GPT-MoE %dL d=%d, %d experts top-2, 8 x %d tokens/rank "
              "(medians of %zu steps after warmup)\n",
              absl::GetFlag(FLAGS_world), absl::GetFlag(FLAGS_world),
              absl::GetFlag(FLAGS_n_layer), absl::GetFlag(FLAGS_d_model),
              absl::GetFlag(FLAGS_experts), absl::GetFlag(FLAGS_seq_len), with.step_ms.size());
  std::printf("%-12s %10s %24s\n", "mode", "step_ms", "a2a wait (exposed) ms");
  std::printf("%-12s %10.1f %24.2f\n", "overlap", weft::bench::Median(with.step_ms),
              weft::bench::Median(with.wait_ms));
  std::printf("%-12s %10.1f %24.2f\n", "no overlap", weft::bench::Median(without.step_ms),
              weft::bench::Median(without.wait_ms));
  return 0;
}
