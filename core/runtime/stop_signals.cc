#include "core/runtime/stop_signals.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft {
namespace {

constexpr int kStopSignals[] = {SIGTERM, SIGUSR1};

std::atomic<int> pending{0};
std::atomic<int> stopped_by{0};

void Record(int sig) {
  int none = 0;
  pending.compare_exchange_strong(none, sig);  // keep the first
}

// Async-signal-safe: one atomic compare-exchange.
void OnSignal(int sig) { Record(sig); }

sigset_t StopSet() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kStopSignals) sigaddset(&set, sig);
  return set;
}

// A child forked after Install has no sigwait thread and the signals
// blocked: unblocked, the handler records them there. The parent's signal
// is not the child's.
void InChildAfterFork() {
  pending.store(0);
  stopped_by.store(0);
  const sigset_t set = StopSet();
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

absl::Status Install() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // system calls in running threads resume
  for (int sig : kStopSignals) {
    if (::sigaction(sig, &sa, nullptr) != 0) {
      return Internal(absl::StrCat("sigaction(", strsignal(sig), "): ", std::strerror(errno)),
                      "a handler for the stop signals");
    }
  }
  const sigset_t set = StopSet();
  if (const int rc = ::pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0) {
    return Internal(absl::StrCat("pthread_sigmask: ", std::strerror(rc)), "the stop signals blocked");
  }
  if (const int rc = ::pthread_atfork(nullptr, nullptr, InChildAfterFork); rc != 0) {
    return Internal(absl::StrCat("pthread_atfork: ", std::strerror(rc)), "a fork handler");
  }
  // Started after the mask, so it inherits it: sigwait needs the signals blocked.
  std::thread([set] {
    while (true) {
      int sig = 0;
      if (::sigwait(&set, &sig) == 0) Record(sig);
    }
  }).detach();
  return absl::OkStatus();
}

}  // namespace

absl::Status InstallStopSignals() {
  static std::once_flag once;
  static absl::Status installed;
  std::call_once(once, [] { installed = Install(); });
  return installed;
}

int PendingStopSignal() { return pending.load(); }

void NoteStoppedBySignal(int signal) { stopped_by.store(signal); }

int StoppedBySignal() { return stopped_by.load(); }

}  // namespace weft
