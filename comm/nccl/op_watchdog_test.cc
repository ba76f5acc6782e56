// OpWatchdog with fake ops that never finish: a timed-out op, an
// asynchronous communicator error and a failure found elsewhere each reach
// on_failure with the op's rich error, Stop is bounded by its grace rather
// than by the ops' timeouts, and together with AbortableComm the watchdog
// ends a launch stuck waiting on its enqueue.
#include "comm/nccl/op_watchdog.h"

#include <chrono>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "comm/nccl/abortable_comm.h"
#include "comm/nccl/fake_comm.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

using Clock = std::chrono::steady_clock;
using testing::FakeComm;

constexpr absl::Duration kPeriod = absl::Milliseconds(5);

OpInfo AllReduceInfo() {
  return {.group = "group 'test' (nccl, rank 0 of 2)",
          .seq = 7,
          .op = "all_reduce",
          .detail = "sum, f32[4] = 16 B"};
}

OpWatchdog::Op NeverFinishes(absl::Duration timeout) {
  return {.info = AllReduceInfo(),
          .deadline = Deadline::After(timeout),
          .finished = []() -> absl::StatusOr<bool> { return false; }};
}

// Collects what on_failure was called with.
class Failures {
 public:
  OpWatchdog::Hooks Hooks() {
    return {.on_failure = [this](const absl::Status& s) {
      std::lock_guard<std::mutex> lock(mu_);
      if (first_.ok()) first_ = s;
      ++count_;
      if (!seen_.HasBeenNotified()) seen_.Notify();
    }};
  }
  bool WaitForFirst(absl::Duration timeout) {
    return seen_.WaitForNotificationWithTimeout(timeout);
  }
  absl::Status first() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_;
  }
  int count() {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }

 private:
  std::mutex mu_;
  absl::Status first_;
  int count_ = 0;
  absl::Notification seen_;
};

TEST(OpWatchdogTest, ReleasesFinishedOps) {
  Failures failures;
  OpWatchdog watchdog(failures.Hooks(), kPeriod);
  std::atomic<bool> finished{false};
  absl::Notification released;
  watchdog.Track({.info = AllReduceInfo(),
                  .deadline = Deadline::After(absl::Seconds(300)),
                  .finished = [&]() -> absl::StatusOr<bool> { return finished.load(); },
                  .release = [&] { released.Notify(); }});
  finished = true;
  EXPECT_TRUE(released.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(watchdog.Stop(Deadline::After(absl::ZeroDuration())));
  EXPECT_EQ(failures.count(), 0);
}

TEST(OpWatchdogTest, AnOpPastItsTimeoutFailsWithItsDescription) {
  Failures failures;
  OpWatchdog watchdog(failures.Hooks(), kPeriod);
  watchdog.Track(NeverFinishes(absl::Milliseconds(50)));
  ASSERT_TRUE(failures.WaitForFirst(absl::Seconds(5)));
  const absl::Status s = failures.first();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "all_reduce #7")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "within its timeout")) << s;
  // The failed op is dropped, so Stop has nothing left to wait for.
  EXPECT_TRUE(watchdog.Stop(Deadline::After(absl::Seconds(5))));
  EXPECT_EQ(failures.count(), 1);
}

TEST(OpWatchdogTest, AnAsynchronousCommunicatorErrorFailsTheRunningOp) {
  Failures failures;
  OpWatchdog::Hooks hooks = failures.Hooks();
  hooks.comm_error = [] { return absl::InternalError("remote rank failed"); };
  OpWatchdog watchdog(hooks, kPeriod);
  watchdog.Track(NeverFinishes(absl::Seconds(300)));
  ASSERT_TRUE(failures.WaitForFirst(absl::Seconds(5)));
  const absl::Status s = failures.first();
  EXPECT_TRUE(absl::StrContains(s.message(), "all_reduce #7")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "asynchronous error: remote rank failed")) << s;
}

TEST(OpWatchdogTest, AFailureFoundElsewhereIsHandedOn) {
  Failures failures;
  OpWatchdog::Hooks hooks = failures.Hooks();
  hooks.group_error = [] { return absl::DeadlineExceededError("Synchronize gave up"); };
  OpWatchdog watchdog(hooks, kPeriod);
  ASSERT_TRUE(failures.WaitForFirst(absl::Seconds(5)));
  EXPECT_EQ(failures.first().message(), "Synchronize gave up");
}

TEST(OpWatchdogTest, StopGivesRunningOpsItsGraceNotTheirTimeout) {
  Failures failures;
  OpWatchdog watchdog(failures.Hooks(), kPeriod);
  watchdog.Track(NeverFinishes(absl::Seconds(300)));
  const Clock::time_point start = Clock::now();
  EXPECT_FALSE(watchdog.Stop(Deadline::After(absl::Milliseconds(100))));  // one left running
  const auto took = Clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(90));
  EXPECT_LT(took, std::chrono::seconds(1));
  EXPECT_EQ(failures.count(), 0);
}

TEST(OpWatchdogTest, StopWaitsForAnOpThatFinishesWithinTheGrace) {
  Failures failures;
  OpWatchdog watchdog(failures.Hooks(), kPeriod);
  const Clock::time_point done_at = Clock::now() + std::chrono::milliseconds(50);
  watchdog.Track({.info = AllReduceInfo(),
                  .deadline = Deadline::After(absl::Seconds(300)),
                  .finished = [&]() -> absl::StatusOr<bool> { return Clock::now() >= done_at; }});
  const Clock::time_point start = Clock::now();
  EXPECT_TRUE(watchdog.Stop(Deadline::After(absl::Seconds(10))));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
}

TEST(OpWatchdogTest, DestroyingAWatchdogWithARunningOpDoesNotWait) {
  Failures failures;
  const Clock::time_point start = Clock::now();
  {
    OpWatchdog watchdog(failures.Hooks(), kPeriod);
    watchdog.Track(NeverFinishes(absl::Seconds(300)));
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
}

// NcclProcessGroup's arrangement: the watchdog aborts the communicator while
// a launch holds its mutex, waiting up to the op timeout for a stuck enqueue.
TEST(OpWatchdogTest, ItsAbortEndsALaunchStuckOnItsEnqueue) {
  FakeComm fake;  // the enqueue never settles
  AbortableComm comm(fake.Ops());
  absl::Status failure;
  OpWatchdog watchdog({.comm_error = [&] { return comm.AsyncError(); },
                       .on_failure =
                           [&](const absl::Status& s) {
                             failure = s;
                             comm.Abort();
                           }},
                      kPeriod);
  std::mutex launch_mu;
  absl::Status launch_status;
  const Clock::time_point start = Clock::now();
  std::thread launch([&] {
    std::lock_guard<std::mutex> lock(launch_mu);
    ASSERT_TRUE(comm.Run([] { return absl::OkStatus(); }).ok());
    launch_status = comm.Await(Deadline::After(absl::Seconds(300)));
  });
  // An earlier op, already on the GPU, that never finishes: its timeout is short.
  watchdog.Track(NeverFinishes(absl::Milliseconds(100)));
  launch.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(launch_status.code(), absl::StatusCode::kAborted) << launch_status;
  EXPECT_TRUE(watchdog.Stop(Deadline::After(absl::Seconds(5))));
  EXPECT_EQ(failure.code(), absl::StatusCode::kDeadlineExceeded) << failure;
  EXPECT_EQ(fake.aborts, 1);
  EXPECT_FALSE(fake.overlapped);
}

}  // namespace
}  // namespace weft::comm
