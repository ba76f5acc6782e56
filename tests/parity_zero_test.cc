// zero stages 1, 2 and 3 with 2 and 4 gloo ranks (processes) vs one process:
// same loss at every step and same parameters after 20 steps. Stages 2 and
// 3 also run with gradient accumulation, which reduce-scatters every micro-batch.
#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

// Only f32 summation order differs from the single process (see ddp).
constexpr double kLossRtol = 1e-4;
constexpr double kParamTol = 1e-3;

class ZeroParityTest : public ::testing::TestWithParam<int> {};

TEST_P(ZeroParityTest, TwoAndFourRanksMatchOneProcess) {
  const int stage = GetParam();
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy("zero");
  p->set_zero_stage(stage);
  p->set_bucket_mb(0.02);  // several buckets for stages 1-2
  for (int world : {2, 4}) {
    job.mutable_train()->set_micro_batch(8 / world);
    auto multi = testing::RunMultiProcess(job, world);
    ASSERT_TRUE(multi.ok()) << multi.status();
    testing::ExpectParity(*single, *multi, kLossRtol, kParamTol,
                          "zero-" + std::to_string(stage) + " world " + std::to_string(world));
  }
  if (stage >= 2) {
    // Caught a real bug: a reduce-scatter still in flight from one
    // micro-batch while the next one's backward wrote the same buffer.
    job.mutable_train()->set_micro_batch(2);  // 2 ranks x 2 micro-batches
    auto accum = testing::RunMultiProcess(job, 2);
    ASSERT_TRUE(accum.ok()) << accum.status();
    testing::ExpectParity(*single, *accum, kLossRtol, kParamTol,
                          "zero-" + std::to_string(stage) + " accumulation");
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroParityTest, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace weft
