// Golden loss curve: the tiny GPT's first 10 losses for a fixed seed and
// data, recorded from this build. A change to any kernel, layer, optimizer,
// sampler or initializer that alters the math moves these by far more than
// the tolerance, which only absorbs BLAS summation-order differences
// between CPU models. Regenerate deliberately, never to make a test pass.
// Last regenerated when the LR schedule moved to llm.c's (step 4 on; step 2
// moved in its last digits).
#include <cmath>
#include <cstdio>

#include "gtest/gtest.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

constexpr double kGolden[] = {
    3.7459867, 3.66698098, 3.5582242, 3.47929645, 3.465446,
    3.42249417, 3.3496089, 3.3480916, 3.34307027, 3.26328254,
};

TEST(GoldenLossTest, TinyGptFirstTenSteps) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(10);
  auto trainer = testing::MakeGptTrainer(job);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  for (int i = 0; i < 10; ++i) {
    auto s = (*trainer)->TrainStep();
    ASSERT_TRUE(s.ok()) << s.status();
    std::printf("    %.9g,\n", s->loss);
    EXPECT_NEAR(s->loss, kGolden[i], 5e-4 * kGolden[i]) << "step " << i + 1;
  }
}

}  // namespace
}  // namespace weft
