// tp=1 on one gloo rank trains like no tp (see tp_single_rank.h). The CUDA
// twin is tp_gpu_test.
#include "gtest/gtest.h"
#include "tests/tiny_gpt.h"
#include "tests/tp_single_rank.h"

namespace weft {
namespace {

TEST(TpSingleRankTest, Tp1OnGlooMatchesPlain) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  // f32 on CPU: only the loss's sum of exponentials rounds differently.
  testing::ExpectTp1MatchesPlain(job, "gloo", 8, 1e-5, 1e-4);
}

}  // namespace
}  // namespace weft
