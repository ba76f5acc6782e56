// fsdp with 2 and 4 gloo ranks (processes) vs one process, with and without
// resharding after forward, and with gradient accumulation; same loss at
// every step and same parameters after 20 steps. Over one rank fsdp, zero-3
// and zero-2 keep their state whole: the same again.
#include <algorithm>
#include <string>

#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

constexpr double kLossRtol = 1e-4;  // only f32 summation order differs
constexpr double kParamTol = 1e-3;

GptJob Job() {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  return job;
}

TEST(FsdpParityTest, TwoAndFourRanksMatchOneProcess) {
  GptJob job = Job();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  job.mutable_train()->mutable_parallel()->set_strategy("fsdp");
  for (int world : {2, 4}) {
    job.mutable_train()->set_micro_batch(8 / world);
    auto multi = testing::RunMultiProcess(job, world);
    ASSERT_TRUE(multi.ok()) << multi.status();
    testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, "fsdp world " + std::to_string(world));
    if (world == 4) {
      // Blocks are all-gathered in forward and again in backward, the root
      // unit once (it stays gathered through the step), and every gradient
      // is reduce-scattered once: about 3 Psi, times (n-1)/n bus bytes.
      double blocks = 0, root = 0;
      for (const auto& [name, v] : single->params) {
        (name.rfind("blocks.", 0) == 0 ? blocks : root) += 4.0 * v.size();
      }
      const double f = 3.0 / 4.0;
      EXPECT_NEAR(multi->comm.at("all_gather"), (2 * blocks + root) * f, 0.02 * blocks);
      EXPECT_NEAR(multi->comm.at("reduce_scatter"), (blocks + root) * f, 0.02 * blocks);
    }
  }
}

TEST(FsdpParityTest, NoReshardAfterForwardAndAccumulation) {
  GptJob job = Job();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy("fsdp");
  p->set_reshard_after_forward(false);
  job.mutable_train()->set_micro_batch(2);  // 2 ranks x 2 micro-batches
  auto multi = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, "fsdp no reshard + accumulation");
  double psi = 0;
  for (const auto& [name, v] : single->params) psi += 4.0 * v.size();
  // Gathered once per micro-batch forward and kept for backward.
  EXPECT_LT(multi->comm.at("all_gather"), 2 * 0.5 * psi * 1.05);
}

// A dp_shard group of one rank has nothing to shard: fsdp and zero-3 keep
// parameters and gradients whole, zero-2 its gradients (ShardedGroup's
// kFull mode), and say so in the startup notes.
TEST(FsdpParityTest, OneRankKeepsStateWholeAndMatchesOneProcess) {
  GptJob job = Job();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  for (int stage : {0, 3, 2}) {
    const std::string label = stage == 0 ? "fsdp" : "zero-" + std::to_string(stage);
    ParallelConfig* p = job.mutable_train()->mutable_parallel();
    p->set_strategy(stage == 0 ? "fsdp" : "zero");
    p->set_zero_stage(stage == 0 ? 1 : stage);
    auto one = testing::RunMultiProcess(job, 1);
    ASSERT_TRUE(one.ok()) << label << ": " << one.status();
    testing::ExpectParity(*single, *one, kLossRtol, kParamTol, label + " on one rank");
    EXPECT_TRUE(std::any_of(one->notes.begin(), one->notes.end(), [](const std::string& n) {
      return n.find("stay whole (nothing to shard)") != std::string::npos;
    })) << label;
  }
}

TEST(FsdpParityTest, ReduceInBf16StaysClose) {
  GptJob job = Job();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy("fsdp");
  p->set_reduce_dtype("bf16");
  job.mutable_train()->set_micro_batch(4);
  auto multi = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(multi.ok()) << multi.status();
  // bf16 gradients (8-bit mantissa) in the reduction: close, not exact.
  testing::ExpectParity(*single, *multi, 2e-2, 5e-2, "fsdp bf16 reduce");
}

}  // namespace
}  // namespace weft
