// Does ddp hide its all-reduce behind the backward pass? Runs the same GPT
// training as N gloo ranks (forked processes on loopback) twice: with
// overlap (bucket all-reduces launched from post-backward hooks) and
// without (every bucket launched after backward), and prints the step
// breakdown: step time, and ddp_wait_ms, the time the step still waits
// for communication after backward finished (the exposed part).
//
//   bazel run -c opt //tools/bench:ddp_overlap -- [--world=2] [--steps=12]
//       [--n_layer=4] [--d_model=256] [--bucket_mb=1]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "tests/tiny_gpt.h"
#include "tools/bench/rank_step_timings.h"
#include "tools/bench/bench_flags.h"

ABSL_FLAG(int, world, 2, "ranks");
ABSL_FLAG(int, steps, 12, "steps per run (the first 2 are warmup)");
ABSL_FLAG(int, n_layer, 4, "layers");
ABSL_FLAG(int, d_model, 256, "width");
ABSL_FLAG(double, bucket_mb, 1.0, "ddp bucket size");

namespace weft {
namespace {

struct Summary {
  double step_ms = 0, wait_ms = 0;
};

absl::StatusOr<Summary> Run(bool overlap) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(dir));
  const int world = absl::GetFlag(FLAGS_world);
  job.mutable_train()->set_steps(absl::GetFlag(FLAGS_steps));
  job.mutable_train()->set_seq_len(64);
  job.mutable_train()->set_global_batch(8 * world);
  job.mutable_train()->set_micro_batch(8);
  job.mutable_model()->set_n_layer(absl::GetFlag(FLAGS_n_layer));
  job.mutable_model()->set_d_model(absl::GetFlag(FLAGS_d_model));
  job.mutable_model()->set_n_head(4);
  job.mutable_model()->set_max_seq_len(64);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy("ddp");
  p->set_overlap(overlap);
  p->set_bucket_mb(absl::GetFlag(FLAGS_bucket_mb));
  WEFT_ASSIGN_OR_RETURN(bench::StepTimings t,
                        bench::TimeRankSteps(job, world, "ddp_wait_ms",
                                             absl::StrCat("ddp_overlap_", overlap)));
  return Summary{bench::Median(t.step_ms), bench::Median(t.wait_ms)};
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  weft::bench::ParseBenchmarkFlags(
      argc, argv,
      "How much of ddp's all-reduce hides behind the backward: a GPT on --world gloo ranks,\n"
      "with and without overlap.\nusage: ddp_overlap [--world=N] [--steps=S] [--bucket_mb=MB]");
  weft::bench::RequireFlag(absl::GetFlag(FLAGS_world) >= 2,
                           absl::StrCat("world=", absl::GetFlag(FLAGS_world)),
                           "at least 2 ranks (one rank has nothing to all-reduce)");
  weft::bench::RequireFlag(absl::GetFlag(FLAGS_steps) > 2,
                           absl::StrCat("steps=", absl::GetFlag(FLAGS_steps)),
                           "more than the 2 warm-up steps");
  auto with = weft::Run(true);
  auto without = weft::Run(false);
  if (!with.ok() || !without.ok()) {
    std::fprintf(stderr, "error: %s\n",
                 (!with.ok() ? with.status() : without.status()).ToString().c_str());
    return 1;
  }
  std::printf("ddp, %d gloo ranks, GPT %dL d=%d, bucket %.2f MB (medians after warmup)\n",
              absl::GetFlag(FLAGS_world), absl::GetFlag(FLAGS_n_layer),
              absl::GetFlag(FLAGS_d_model), absl::GetFlag(FLAGS_bucket_mb));
  std::printf("%-12s %12s %22s\n", "mode", "step_ms", "exposed comm (wait) ms");
  std::printf("%-12s %12.1f %22.1f\n", "overlap", with->step_ms, with->wait_ms);
  std::printf("%-12s %12.1f %22.1f\n", "no overlap", without->step_ms, without->wait_ms);
  std::printf("hidden by overlap: %.1f ms of %.1f ms communication per step (%.0f%%)\n",
              without->wait_ms - with->wait_ms, without->wait_ms,
              100.0 * (without->wait_ms - with->wait_ms) / std::max(1e-9, without->wait_ms));
  return 0;
}
