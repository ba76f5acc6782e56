// ddp with 2 and 4 gloo ranks (processes) vs one process: same loss at every
// step and same parameters after 20 steps, and the same with gradient
// accumulation (no_sync on all but the last micro-batch).
#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

// f32 sums in a different order (per-rank partial sums, then the
// all-reduce) differ in the last bits; after 20 AdamW steps that stays well
// under these bounds, while any real bug (a missing or doubled gradient,
// wrong scaling, a skipped bucket) moves the loss by > 1e-2.
constexpr double kLossRtol = 1e-4;
constexpr double kParamTol = 1e-3;

GptJob Job() {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  return job;
}

TEST(DdpParityTest, TwoAndFourRanksMatchOneProcess) {
  GptJob job = Job();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  job.mutable_train()->mutable_parallel()->set_strategy("ddp");
  job.mutable_train()->mutable_parallel()->set_bucket_mb(0.01);  // several buckets
  for (int world : {2, 4}) {
    job.mutable_train()->set_micro_batch(8 / world);
    auto multi = testing::RunMultiProcess(job, world);
    ASSERT_TRUE(multi.ok()) << multi.status();
    testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, "ddp world " + std::to_string(world));
  }
}

TEST(DdpParityTest, GradientAccumulationWithNoSync) {
  GptJob job = Job();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  job.mutable_train()->mutable_parallel()->set_strategy("ddp");
  job.mutable_train()->set_micro_batch(1);  // 2 ranks x 4 micro-batches of 1
  auto multi = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, "ddp accumulation");
  // One all-reduce of every gradient per optimizer step, not per micro-batch:
  // ~2 Psi bus bytes per step with Psi = gradient bytes (2(n-1)/n x Psi for n=2).
  double psi = 0;
  for (const auto& [name, v] : single->params) psi += 4.0 * v.size();
  EXPECT_NEAR(multi->comm.at("all_reduce"), psi, 0.01 * psi);
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

// Fixed seed and world size: two multi-process runs are bitwise identical.
TEST(DdpParityTest, RepeatedRunsAreBitwiseIdentical) {
  GptJob job = Job();
  job.mutable_train()->set_steps(8);
  job.mutable_train()->mutable_parallel()->set_strategy("ddp");
  job.mutable_train()->set_micro_batch(2);
  auto a = testing::RunMultiProcess(job, 2);
  auto b = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(a->losses, b->losses);
  EXPECT_EQ(a->params, b->params);
}

}  // namespace
}  // namespace weft
