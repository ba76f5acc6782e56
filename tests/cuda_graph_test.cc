// --cuda_graph without a GPU: refused at startup with what to do, never a
// silent eager run. (The replay itself is checked on a GPU:
// cuda_graph_gpu_test.)
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

TEST(CudaGraphTest, RefusedOnCpu) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_cuda_graph(true);
  absl::StatusOr<std::unique_ptr<Trainer>> t = testing::MakeGptTrainer(job);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(t.status().message().find("--cuda_graph on cpu"), std::string::npos) << t.status();
  EXPECT_NE(t.status().message().find("a CUDA device"), std::string::npos) << t.status();
  job.mutable_train()->set_cuda_graph(false);
  EXPECT_TRUE(testing::MakeGptTrainer(job).ok());
}

}  // namespace
}  // namespace weft
