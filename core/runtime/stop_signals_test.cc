#include "core/runtime/stop_signals.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace weft {
namespace {

bool WaitForPending(int sig) {
  for (int i = 0; i < 500 && PendingStopSignal() != sig; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return PendingStopSignal() == sig;
}

// One process-wide state, so one test walks through it in order.
TEST(StopSignalsTest, RecordsTheFirstSignalAndTheProcessLives) {
  EXPECT_EQ(PendingStopSignal(), 0);
  EXPECT_EQ(StoppedBySignal(), 0);
  ASSERT_TRUE(InstallStopSignals().ok());
  ASSERT_TRUE(InstallStopSignals().ok());  // a second call does nothing

  // Threads started later inherit the block, so their calls see no EINTR.
  bool blocked_in_new_thread = false;
  std::thread([&] {
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    blocked_in_new_thread = sigismember(&now, SIGTERM) && sigismember(&now, SIGUSR1);
  }).join();
  EXPECT_TRUE(blocked_in_new_thread);

  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);  // default action would end the test
  EXPECT_TRUE(WaitForPending(SIGTERM));
  ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(PendingStopSignal(), SIGTERM) << "the first signal is the one kept";

  NoteStoppedBySignal(SIGTERM);
  EXPECT_EQ(StoppedBySignal(), SIGTERM);

  // A forked child (the test harness's ranks) starts with nothing pending
  // and still records its own signal, though no sigwait thread came along.
  const pid_t child = ::fork();
  if (child == 0) {
    if (PendingStopSignal() != 0 || StoppedBySignal() != 0) ::_exit(2);
    ::kill(::getpid(), SIGTERM);
    ::_exit(WaitForPending(SIGTERM) ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of its SIGTERM";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: inherited the parent's signal; 3: never recorded its own";
}

}  // namespace
}  // namespace weft
