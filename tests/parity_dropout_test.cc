// Dropout does not depend on how a step's global batch is split: masks are
// keyed by the step and each sample's place in the global batch
// (core/kernels/philox.h, RunContext::samples), so one process, gradient
// accumulation, dp replicas in one process, ddp and fsdp ranks, each with
// dropout 0.1, follow the same losses and parameters. Before, masks were
// keyed by (micro-batch, dp rank) and every one of these runs drew its own.
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

constexpr double kLossRtol = 1e-4;
constexpr double kParamTol = 1e-3;

GptJob DropoutJob() {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  job.mutable_model()->set_dropout(0.1f);
  return job;
}

void Check(const testing::ParityRun& single, const testing::ParityRun& run,
           const std::string& label) {
  testing::ExpectParity(single, run, kLossRtol, kParamTol, label);
  std::printf("%s vs one process, dropout 0.1: max loss rdiff %.2e, param diff %.2e\n",
              label.c_str(), testing::MaxLossRelDiff(run, single),
              testing::MaxRelativeDifference(run.params, single.params));
}

TEST(DropoutParityTest, AccumulationAndReplicasDrawOneProcesssMasks) {
  GptJob job = DropoutJob();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  // The masks are on: the same job without them trains differently.
  GptJob off = job;
  off.mutable_model()->set_dropout(0.f);
  auto plain = testing::RunSingleProcess(off);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_GT(testing::MaxLossRelDiff(*plain, *single), 1e-3);

  GptJob accum = job;
  accum.mutable_train()->set_micro_batch(2);  // 4 micro-batches of 2
  auto a = testing::RunSingleProcess(accum);
  ASSERT_TRUE(a.ok()) << a.status();
  Check(*single, *a, "accumulation 4 x 2");

  GptJob dp = job;
  dp.mutable_train()->mutable_parallel()->set_strategy("dp");
  dp.mutable_train()->mutable_parallel()->set_dp_devices(3);  // rows 3, 3, 2
  auto replicas = testing::RunSingleProcess(dp);
  ASSERT_TRUE(replicas.ok()) << replicas.status();
  Check(*single, *replicas, "dp 3 replicas");
}

TEST(DropoutParityTest, DataParallelRanksDrawOneProcesssMasks) {
  GptJob job = DropoutJob();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy("ddp");
  job.mutable_train()->set_micro_batch(2);  // 2 ranks x 2 micro-batches of 2
  auto ddp = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(ddp.ok()) << ddp.status();
  Check(*single, *ddp, "ddp 2 ranks x 2 micro-batches");

  p->set_strategy("fsdp");
  job.mutable_train()->set_micro_batch(2);  // 4 ranks x 1 micro-batch
  auto fsdp = testing::RunMultiProcess(job, 4);
  ASSERT_TRUE(fsdp.ok()) << fsdp.status();
  Check(*single, *fsdp, "fsdp 4 ranks");
}

}  // namespace
}  // namespace weft
