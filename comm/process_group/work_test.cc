#include "comm/process_group/work.h"

#include <thread>
#include <vector>

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

// In a subgroup the peer's group rank is not its process: the error names
// the job-wide rank too (group rank 1 of 'dp/pp_grad_even[0,2]' is rank 2).
TEST(OpInfoTest, ASubgroupsPeerIsNamedByItsGlobalRankToo) {
  OpInfo info = TestInfo();
  info.global_ranks = std::make_shared<const std::vector<int>>(std::vector<int>{0, 2});
  absl::Status s = info.Error(absl::StatusCode::kUnavailable, "connection closed", 1);
  EXPECT_TRUE(absl::StrContains(s.message(), "(peer rank 1 of the group (global rank 2))")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "Hint: rank 1 of the group (global rank 2) failed"))
      << s;
}

// Records what the group's observer is told, for the test below.
class RecordingObserver : public OpObserver {
 public:
  void OnWaitBegin(const OpInfo& info) override { began.push_back(info.seq); }
  void OnWaitEnd(const ObservedOp& op) override { ended.push_back(op); }
  std::vector<int64_t> began;
  std::vector<ObservedOp> ended;
};

TEST(WorkTest, ObserverSeesTheWaitAndTheHostSpanOfTheOp) {
  auto observer = std::make_shared<RecordingObserver>();
  auto work = std::make_shared<HostWork>(TestInfo(), nullptr);
  const int64_t issued = WallMicros();
  work->Observe(observer, 16, issued);
  std::thread runner([&] {
    absl::SleepFor(absl::Milliseconds(5));
    work->MarkStarted();
    absl::SleepFor(absl::Milliseconds(20));
    work->Complete(absl::OkStatus());
  });
  EXPECT_TRUE(work->Wait().ok());
  runner.join();
  ASSERT_EQ(observer->began, std::vector<int64_t>{7});
  ASSERT_EQ(observer->ended.size(), 1u);
  const ObservedOp& op = observer->ended[0];
  EXPECT_EQ(op.info->op, "all_reduce");
  EXPECT_EQ(op.payload_bytes, 16);
  EXPECT_EQ(op.issued_us, issued);
  ASSERT_TRUE(op.started_us.has_value() && op.finished_us.has_value());
  EXPECT_GE(*op.started_us, issued + 4000);
  EXPECT_GE(*op.finished_us - *op.started_us, 19000);
  EXPECT_LE(op.wait_begin_us, *op.started_us);
  EXPECT_GE(op.wait_end_us, *op.finished_us);
  EXPECT_TRUE(op.ok);
}

}  // namespace
}  // namespace weft::comm
