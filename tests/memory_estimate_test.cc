// The memory estimator (core/runtime/memory_estimate.h) against the
// allocator's exact statistics of real runs: every data-parallel strategy
// at 1, 2 and 4 gloo ranks (forked processes), and single-process dp with
// 1 and 3 replicas (threads), for the tiny GPT and a
// 12-layer GPT. The estimate is made first, from the config alone; the job
// then trains for the same number of steps, and rank 0's device allocator
// peak (what the trainer logs as peak_mem_mb) must be within 10% of it.
// The per-category peaks (parameters, gradients, optimizer state,
// activations) are checked the same way. The table is printed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/runtime/memory_estimate.h"
#include "gtest/gtest.h"
#include "tests/estimate_rank.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

constexpr double kTolerance = 0.10;

struct Case {
  std::string label;
  std::string strategy;
  int zero_stage;
  int world;
  int dp_devices = 1;  // dp: replicas in the one process
};

std::vector<Case> Cases() {
  // dp (single-process DataParallel) replicates the model in its process:
  // on CPU every replica is in the same host memory, so all of them count.
  std::vector<Case> cases = {
      {"none", "", 0, 1}, {"dp", "dp", 0, 1, 1}, {"dp x3", "dp", 0, 1, 3}};
  for (int world : {1, 2, 4}) {
    cases.push_back({"ddp", "ddp", 0, world});
    cases.push_back({"zero-1", "zero", 1, world});
    cases.push_back({"zero-2", "zero", 2, world});
    cases.push_back({"zero-3", "zero", 3, world});
    cases.push_back({"fsdp", "fsdp", 0, world});
  }
  return cases;
}

GptJob BaseJob(int n_layer) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(2);
  // 8 sequences per step at every world size: micro-batches of 2, so 4
  // ranks take one each and 1 rank accumulates 4.
  job.mutable_train()->set_micro_batch(2);
  job.mutable_model()->set_n_layer(n_layer);
  // Small buckets, so ddp and zero-1/2 have several, as at scale.
  job.mutable_train()->mutable_parallel()->set_bucket_mb(0.02);
  return job;
}

double Error(double estimate, double measured) { return (estimate - measured) / measured; }

void CheckModel(const std::string& model, int n_layer) {
  std::printf("\n%s: estimate vs measured, rank 0, bytes\n", model.c_str());
  std::printf("%-8s %2s %10s %10s %8s | %9s %9s %9s %9s (estimate / measured - 1)\n", "strategy",
              "N", "estimate", "measured", "error", "params", "grads", "optim", "acts");
  for (const Case& c : Cases()) {
    GptJob job = BaseJob(n_layer);
    job.mutable_train()->mutable_parallel()->set_strategy(c.strategy);
    if (c.zero_stage > 0) job.mutable_train()->mutable_parallel()->set_zero_stage(c.zero_stage);
    job.mutable_train()->mutable_parallel()->set_dp_devices(c.dp_devices);

    absl::StatusOr<MemoryEstimate> e = testing::EstimateRank(job, c.world);
    ASSERT_TRUE(e.ok()) << c.label << " x" << c.world << ": " << e.status();

    absl::StatusOr<testing::ParityRun> run = c.strategy.empty() || c.strategy == "dp"
                                                 ? testing::RunSingleProcess(job)
                                                 : testing::RunMultiProcess(job, c.world);
    ASSERT_TRUE(run.ok()) << c.label << " x" << c.world << ": " << run.status();
    std::map<std::string, double>& m = run->memory;

    const double err = Error(static_cast<double>(e->peak()), m["peak"]);
    const double categories[4][2] = {{static_cast<double>(e->params), m["params"]},
                                     {static_cast<double>(e->grads), m["grads"]},
                                     {static_cast<double>(e->optimizer), m["optimizer"]},
                                     {static_cast<double>(e->activations), m["activations"]}};
    std::printf("%-8s %2d %10lld %10.0f %+7.2f%% |", c.label.c_str(), c.world,
                static_cast<long long>(e->peak()), m["peak"], 100 * err);
    for (const auto& [est, meas] : categories) std::printf(" %+8.2f%%", 100 * Error(est, meas));
    std::printf("\n");

    const std::string where = model + " " + c.label + " x" + std::to_string(c.world);
    EXPECT_GT(m["peak"], 0) << where;
    EXPECT_LE(std::fabs(err), kTolerance) << where << ": estimate " << e->peak()
                                          << " measured " << m["peak"];
    for (const auto& [est, meas] : categories) {
      EXPECT_LE(std::fabs(Error(est, meas)), kTolerance) << where << " (a category)";
    }
  }
}

TEST(MemoryEstimateTest, TinyGpt) { CheckModel("tiny GPT (2 layers, d=32)", 2); }

// A --cuda_graph job is estimated (its dry run is eager on the meta device):
// the same figures as without it, no refusal for running on meta.
TEST(MemoryEstimateTest, CudaGraphJobIsEstimatedLikeItsEagerStep) {
  int64_t peaks[2] = {0, 0};
  for (int graph = 0; graph < 2; ++graph) {
    GptJob job = BaseJob(2);
    job.mutable_train()->set_device("cuda");
    job.mutable_train()->set_cuda_graph(graph == 1);
    MemoryEstimateOptions o;
    o.trainer = testing::GptTrainerOptions(job);
    o.world_size = 1;
    o.steps = 2;
    absl::StatusOr<MemoryEstimate> e = EstimateMemory(std::move(o));
    ASSERT_TRUE(e.ok()) << e.status();
    peaks[graph] = e->peak();
  }
  EXPECT_GT(peaks[0], 0);
  EXPECT_EQ(peaks[0], peaks[1]);
}

// A job the trainer refuses is refused by its estimate too, with the same
// reason: bf16 compute or gradients on the CPU (an estimate used to print a
// full table, and --strategy=auto a pick, for a job that could not run).
TEST(MemoryEstimateTest, DtypesTheTrainerRefusesAreRefused) {
  for (const bool grads : {false, true}) {
    GptJob job = BaseJob(2);
    if (grads) {
      job.mutable_train()->set_grad_dtype("bf16");
    } else {
      job.mutable_train()->set_dtype("bf16");
    }
    MemoryEstimateOptions o;
    o.trainer = testing::GptTrainerOptions(job);
    o.world_size = 1;
    o.steps = 2;
    absl::StatusOr<MemoryEstimate> e = EstimateMemory(std::move(o));
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find(grads ? "--grad_dtype=bf16 on CPU" : "--dtype=bf16 on CPU"),
              std::string::npos)
        << e.status();
  }
}

TEST(MemoryEstimateTest, TwelveLayerGpt) { CheckModel("GPT 12 layers, d=32", 12); }

}  // namespace
}  // namespace weft
