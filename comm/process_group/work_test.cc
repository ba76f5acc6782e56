#include "comm/process_group/work.h"

#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

OpInfo TestInfo() {
  OpInfo info;
  info.group = "group 'test' (fake, rank 0 of 2)";
  info.seq = 7;
  info.op = "all_reduce";
  info.detail = "sum, f32[4] = 16 B";
  info.timeout = absl::Seconds(1);
  return info;
}

TEST(WorkTest, WaitReturnsTheCompletionStatus) {
  auto work = std::make_shared<HostWork>(TestInfo(), nullptr);
  EXPECT_FALSE(work->IsCompleted());
  std::thread completer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    work->Complete(absl::OkStatus());
  });
  EXPECT_TRUE(work->Wait().ok());
  EXPECT_TRUE(work->IsCompleted());
  completer.join();
  // Later completions are ignored.
  work->Complete(absl::InternalError("late"));
  EXPECT_TRUE(work->Wait().ok());
}

TEST(WorkTest, WaitTimeoutBreaksTheGroupWithARichError) {
  auto health = std::make_shared<GroupHealth>();
  auto work = std::make_shared<HostWork>(TestInfo(), health);
  absl::Status s = work->Wait(absl::Milliseconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(s.message(), "all_reduce #7")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "group 'test'")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "f32[4]")) << s;
  EXPECT_TRUE(health->broken());
  EXPECT_EQ(health->status(), s);
}

TEST(WorkTest, FirstErrorWins) {
  GroupHealth health;
  health.MarkBroken(absl::OkStatus());
  EXPECT_FALSE(health.broken());
  health.MarkBroken(absl::InternalError("first"));
  health.MarkBroken(absl::InternalError("second"));
  EXPECT_EQ(health.status().message(), "first");
}

TEST(WorkTest, CompletedWork) {
  auto work = MakeCompletedWork(TestInfo(), absl::InvalidArgumentError("bad"));
  EXPECT_TRUE(work->IsCompleted());
  EXPECT_EQ(work->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(work->Synchronize().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OpInfoTest, ErrorNamesGroupSequenceOpSizesAndPeer) {
  absl::Status s = TestInfo().Error(absl::StatusCode::kUnavailable, "connection closed", 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  for (const char* part : {"all_reduce #7", "sum, f32[4] = 16 B", "group 'test'",
                           "peer rank 1", "connection closed", "Hint:"}) {
    EXPECT_TRUE(absl::StrContains(s.message(), part)) << part << " missing from " << s;
  }
}

}  // namespace
}  // namespace weft::comm
