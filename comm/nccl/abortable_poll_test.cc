// The wait behind every NCCL call, against a fake communicator whose
// operation never finishes: an abort from another thread ends the wait
// within milliseconds, not at the op timeout (the watchdog used to wait for
// the mutex a stuck Launch held for up to 300 s).
#include "comm/nccl/abortable_poll.h"

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace weft::comm {
namespace {

absl::StatusOr<PollState> NeverDone() { return PollState::kInProgress; }

TEST(AbortablePollTest, FinishesWhenTheOperationDoes) {
  std::atomic<bool> abort{false};
  int calls = 0;
  auto poll = [&]() -> absl::StatusOr<PollState> {
    return ++calls < 5 ? PollState::kInProgress : PollState::kDone;
  };
  EXPECT_TRUE(PollUntilDone(poll, Deadline::After(absl::Seconds(10)), abort).ok());
  EXPECT_EQ(calls, 5);
}

TEST(AbortablePollTest, ErrorsFromTheCommunicatorAreReturned) {
  std::atomic<bool> abort{false};
  auto poll = []() -> absl::StatusOr<PollState> { return absl::InternalError("remote error"); };
  EXPECT_EQ(PollUntilDone(poll, Deadline::After(absl::Seconds(10)), abort).message(),
            "remote error");
}

TEST(AbortablePollTest, StuckOperationHitsItsDeadline) {
  std::atomic<bool> abort{false};
  const auto t0 = std::chrono::steady_clock::now();
  const absl::Status s = PollUntilDone(NeverDone, Deadline::After(absl::Milliseconds(50)), abort);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

TEST(AbortablePollTest, AbortFromAnotherThreadEndsAStuckWaitPromptly) {
  std::atomic<bool> abort{false};
  std::chrono::steady_clock::time_point aborted_at;
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    aborted_at = std::chrono::steady_clock::now();
    abort.store(true, std::memory_order_release);
  });
  const absl::Status s = PollUntilDone(NeverDone, Deadline::After(absl::Seconds(300)), abort);
  const auto returned_at = std::chrono::steady_clock::now();
  watchdog.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_LT(returned_at - aborted_at, std::chrono::milliseconds(50));
}

}  // namespace
}  // namespace weft::comm
