#include "models/gpt/recorded_job.h"

#include <string>

#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(RecordedJobTest, ReadsAGptJob) {
  absl::StatusOr<GptJob> job =
      ParseRecordedGptJob("model { n_layer: 2 d_model: 64 } train { seq_len: 32 }", "/ck/step_2");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->model().n_layer(), 2);
  EXPECT_EQ(job->train().seq_len(), 32);
}

// An MLP checkpoint's config: a clean error, and nothing on stderr (the
// default parser logged "[libprotobuf ERROR ...]" there).
TEST(RecordedJobTest, AnotherJobIsAnErrorThatLogsNothing) {
  testing::internal::CaptureStderr();
  absl::StatusOr<GptJob> job =
      ParseRecordedGptJob("model { input_dim: 784 hidden_dims: 128 }", "/ck/step_2");
  const std::string logged = testing::internal::GetCapturedStderr();
  ASSERT_FALSE(job.ok());
  const std::string message(job.status().message());
  EXPECT_NE(message.find("/ck/step_2 does not record a GPT job config"), std::string::npos)
      << message;
  EXPECT_NE(message.find("input_dim"), std::string::npos) << message;
  EXPECT_EQ(logged, "");
}

TEST(RecordedJobTest, AJobWithoutAModelIsAnError) {
  EXPECT_FALSE(ParseRecordedGptJob("", "/ck/step_2").ok());
}

}  // namespace
}  // namespace weft
