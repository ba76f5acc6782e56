// AbortableComm against a fake communicator whose operation never finishes:
// an abort from another thread returns within milliseconds while a launch
// waits (holding its own launch mutex) for the op timeout, the waiting launch
// lets go, nothing reaches the communicator after the abort, and Close is
// bounded by its deadline.
#include "comm/nccl/abortable_comm.h"

#include <chrono>
#include <mutex>
#include <thread>

#include "comm/nccl/fake_comm.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

using Clock = std::chrono::steady_clock;
using testing::FakeComm;

TEST(AbortableCommTest, AwaitEndsWhenTheOperationFinishes) {
  FakeComm fake;
  AbortableComm comm(fake.Ops());
  int enqueued = 0;
  ASSERT_TRUE(comm.Run([&] {
                    ++enqueued;
                    return absl::OkStatus();
                  })
                  .ok());
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    fake.finished = true;
  });
  EXPECT_TRUE(comm.Await(Deadline::After(absl::Seconds(10))).ok());
  finisher.join();
  EXPECT_EQ(enqueued, 1);
  EXPECT_FALSE(fake.overlapped);
}

TEST(AbortableCommTest, AsyncErrorIsTheCommunicatorsError) {
  FakeComm fake;
  AbortableComm comm(fake.Ops());
  EXPECT_TRUE(comm.AsyncError().ok());  // busy is not an error
  fake.error = true;
  EXPECT_EQ(comm.AsyncError().message(), "remote rank failed");
  EXPECT_EQ(comm.Await(Deadline::After(absl::Seconds(10))).message(), "remote rank failed");
}

TEST(AbortableCommTest, AbortDoesNotWaitForALaunchWaitingOnAStuckOp) {
  FakeComm fake;
  AbortableComm comm(fake.Ops());
  std::mutex launch_mu;  // NcclProcessGroup's: held for the whole launch
  std::atomic<bool> waiting{false};
  absl::Status launch_status;
  Clock::time_point launch_returned;
  std::thread launch([&] {
    std::lock_guard<std::mutex> lock(launch_mu);
    ASSERT_TRUE(comm.Run([] { return absl::OkStatus(); }).ok());
    waiting = true;
    launch_status = comm.Await(Deadline::After(absl::Seconds(300)));  // the default op timeout
    launch_returned = Clock::now();
  });
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(5);
  while (fake.polls.load() < 3 && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(waiting);  // the launch is in Await, holding launch_mu

  const Clock::time_point abort_started = Clock::now();
  comm.Abort();
  const Clock::time_point abort_returned = Clock::now();
  launch.join();

  EXPECT_LT(abort_returned - abort_started, std::chrono::seconds(1));
  EXPECT_LT(launch_returned - abort_started, std::chrono::seconds(1));
  EXPECT_EQ(launch_status.code(), absl::StatusCode::kAborted) << launch_status;
  EXPECT_EQ(fake.aborts, 1);
  EXPECT_FALSE(fake.overlapped);  // the abort never ran beside a poll
}

TEST(AbortableCommTest, NothingReachesTheCommunicatorAfterAnAbort) {
  FakeComm fake;
  AbortableComm comm(fake.Ops());
  comm.Abort();
  const int polls = fake.polls;
  bool ran = false;
  EXPECT_EQ(comm.Run([&] {
                  ran = true;
                  return absl::OkStatus();
                })
                .code(),
            absl::StatusCode::kAborted);
  EXPECT_FALSE(ran);
  EXPECT_EQ(comm.Await(Deadline::After(absl::Seconds(10))).code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(comm.AsyncError().ok());
  EXPECT_FALSE(comm.Close(Deadline::After(absl::Seconds(10))));
  EXPECT_EQ(fake.polls, polls);
  EXPECT_EQ(fake.finalizes, 0);
  EXPECT_EQ(fake.destroys, 0);
  EXPECT_EQ(fake.aborts, 1);
}

TEST(AbortableCommTest, ConcurrentAbortsAbortOnce) {
  FakeComm fake;
  AbortableComm comm(fake.Ops());
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) threads.emplace_back([&] { comm.Abort(); });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(fake.aborts, 1);
  EXPECT_TRUE(comm.abort_requested());
}

TEST(AbortableCommTest, CloseFinalizesAndDestroysAnIdleCommunicator) {
  FakeComm fake;
  fake.finished = true;
  AbortableComm comm(fake.Ops());
  EXPECT_TRUE(comm.Close(Deadline::After(absl::Seconds(10))));
  EXPECT_EQ(fake.finalizes, 1);
  EXPECT_EQ(fake.destroys, 1);
  EXPECT_EQ(fake.aborts, 0);
  comm.Abort();  // after Close: nothing more reaches the communicator
  EXPECT_EQ(fake.aborts, 0);
}

TEST(AbortableCommTest, CloseAbortsWhatDoesNotSettleByItsDeadline) {
  FakeComm fake;  // the finalize never completes
  AbortableComm comm(fake.Ops());
  const Clock::time_point start = Clock::now();
  EXPECT_FALSE(comm.Close(Deadline::After(absl::Milliseconds(100))));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(fake.finalizes, 1);
  EXPECT_EQ(fake.destroys, 0);
  EXPECT_EQ(fake.aborts, 1);
}

TEST(AbortableCommTest, CloseAbortsWhenFinalizeFails) {
  FakeComm fake;
  fake.finished = true;
  fake.finalize_fails = true;
  AbortableComm comm(fake.Ops());
  EXPECT_FALSE(comm.Close(Deadline::After(absl::Seconds(10))));
  EXPECT_EQ(fake.destroys, 0);
  EXPECT_EQ(fake.aborts, 1);
}

}  // namespace
}  // namespace weft::comm
