// Gradient accumulation must not change the math: one step over a global
// batch of 8 sequences gives the same loss and parameters whether it runs
// as 1 micro-batch of 8, 2 of 4 or 8 of 1.
#include "gtest/gtest.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

struct TrainResult {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> params;
};

TrainResult Train(int micro_batch) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_micro_batch(micro_batch);
  job.mutable_train()->set_steps(10);
  auto trainer = testing::MakeGptTrainer(job);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  TrainResult r;
  for (int i = 0; i < 10; ++i) {
    auto s = (*trainer)->TrainStep();
    EXPECT_TRUE(s.ok()) << s.status();
    r.losses.push_back(s->loss);
  }
  r.params = *testing::ParameterSnapshot(**trainer);
  return r;
}

TEST(GradAccumTest, MicroBatchSizeDoesNotChangeTheMath) {
  const TrainResult full = Train(8);
  EXPECT_LT(full.losses.back(), full.losses.front());
  for (int micro : {4, 1}) {
    const TrainResult accum = Train(micro);
    // Tolerance: only the summation order of f32 gradients differs.
    for (size_t i = 0; i < full.losses.size(); ++i) {
      EXPECT_NEAR(accum.losses[i], full.losses[i], 1e-5 * full.losses[i]) << "step " << i + 1;
    }
    EXPECT_LT(testing::MaxRelativeDifference(accum.params, full.params), 1e-4) << micro;
  }
}

}  // namespace
}  // namespace weft
