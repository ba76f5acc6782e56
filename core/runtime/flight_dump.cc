#include "core/runtime/flight_dump.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm/process_group/collective_fault.h"
#include "comm/process_group/flight_recorder.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/base/user_path.h"

namespace weft {
namespace {

std::mutex dump_mu;
std::string dump_dir;         // empty: not started
bool failure_dumped = false;  // a failed run's dump is not replaced by the SIGTERM after it
int signal_pipe[2] = {-1, -1};  // handler -> dump thread: the signal
int done_pipe[2] = {-1, -1};    // dump thread -> a fatal signal's handler: written

// Async-signal-safe: forwards the signal to the dump thread. For a fatal
// signal (this rank is about to die: gloo aborts on a size mismatch) it
// waits up to 2 s for the dump, then dies of the signal as it would have.
void OnDumpSignal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  if (signal_pipe[1] >= 0) (void)!::write(signal_pipe[1], &b, 1);
  if (sig == SIGABRT || sig == SIGSEGV || sig == SIGBUS) {
    pollfd done{done_pipe[0], POLLIN, 0};
    (void)::poll(&done, 1, 2000);
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
  errno = saved;
}

const char* SignalReason(int sig) {
  switch (sig) {
    case SIGUSR2: return "SIGUSR2";
    case SIGTERM: return "SIGTERM";
    case SIGABRT: return "SIGABRT: this rank aborted";
    case SIGSEGV: return "SIGSEGV: this rank crashed";
    case SIGBUS: return "SIGBUS: this rank crashed";
  }
  return "signal";
}

// Reads the signals the handler forwards; dumps outside the handler, where
// allocating and writing files is allowed.
void SignalDumpLoop() {
  unsigned char sig;
  while (true) {
    const ssize_t n = ::read(signal_pipe[0], &sig, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    bool skip = false;
    if (sig == SIGTERM) {
      std::lock_guard<std::mutex> lock(dump_mu);
      skip = failure_dumped;
    }
    if (!skip) DumpFlightRecorder(SignalReason(sig), /*unless_failed=*/sig == SIGTERM);
    if (sig == SIGTERM) {
      ::signal(SIGTERM, SIG_DFL);
      ::raise(SIGTERM);
    } else if (sig != SIGUSR2) {
      const unsigned char b = 1;
      (void)!::write(done_pipe[1], &b, 1);
    }
  }
}

absl::Status InstallSignalDumps(bool own_fatal) {
  static std::once_flag once;
  absl::Status status;
  std::call_once(once, [&] {
    if (::pipe2(signal_pipe, O_CLOEXEC) != 0 || ::pipe2(done_pipe, O_CLOEXEC) != 0) {
      status = Internal(absl::StrCat("pipe for the flight recorder's signals: ", std::strerror(errno)));
      return;
    }
    std::thread(SignalDumpLoop).detach();
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = OnDumpSignal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGUSR2, &sa, nullptr);
    if (own_fatal) {
      for (int sig : {SIGTERM, SIGABRT, SIGSEGV, SIGBUS}) ::sigaction(sig, &sa, nullptr);
    }
  });
  return status;
}

}  // namespace

std::string FlightDir(const ParallelConfig& config) {
  if (!config.flight_dir().empty()) return ResolveUserPath(config.flight_dir());
  const char* tmp = std::getenv("TMPDIR");
  return absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/weft_flight");
}

absl::Status StartFlightRecorder(const ParallelConfig& config, int rank, int world_size,
                                 bool own_signals) {
  if (config.flight_recorder() < 0 || config.flight_recorder() > 10000000) {
    return InvalidArgument(absl::StrCat("--flight_recorder=", config.flight_recorder()),
                           "0 (off) to 10000000 ops kept per rank", "the default keeps 2000");
  }
  comm::SetCollectiveFault(std::nullopt);
  if (!config.debug_collective_fault().empty()) {
    WEFT_ASSIGN_OR_RETURN(comm::CollectiveFault fault,
                          comm::ParseCollectiveFault(config.debug_collective_fault()));
    if (fault.rank >= world_size) {
      return InvalidArgument(
          absl::StrCat("--debug_collective_fault names rank ", fault.rank, " of a ", world_size,
                       "-rank job"),
          absl::StrCat("a rank below ", world_size));
    }
    if (fault.rank == rank) comm::SetCollectiveFault(fault);
  }
  comm::FlightRecorder& recorder = comm::FlightRecorder::Global();
  recorder.SetCapacity(config.flight_recorder());
  recorder.SetIdentity(rank, world_size);
  {
    std::lock_guard<std::mutex> lock(dump_mu);
    dump_dir = config.flight_recorder() > 0 ? FlightDir(config) : "";
  }
  if (config.flight_recorder() == 0) return absl::OkStatus();
  return InstallSignalDumps(own_signals);
}

void DumpFlightRecorder(absl::string_view reason, bool unless_failed) {
  // One dump at a time: a failure's and the launcher's SIGTERM after it
  // would otherwise write the same file together.
  static std::mutex* writing = new std::mutex();
  std::lock_guard<std::mutex> one(*writing);
  std::string dir;
  {
    std::lock_guard<std::mutex> lock(dump_mu);
    dir = dump_dir;
  }
  if (dir.empty()) return;
  {
    std::lock_guard<std::mutex> lock(dump_mu);
    // The SIGTERM that follows a failure: the failure's dump says more.
    if (unless_failed && failure_dumped) return;
    if (absl::StartsWith(reason, "failed")) failure_dumped = true;
  }
  std::string path;
  const absl::Status s = comm::FlightRecorder::Global().DumpTo(dir, reason, &path);
  if (!s.ok()) {
    std::fprintf(stderr, "flight recorder: %s\n", std::string(s.message()).c_str());
    return;
  }
  std::fprintf(stderr,
               "flight recorder: wrote %s; after every rank has, bazel run //tools:hang_report "
               "-- %s\n",
               path.c_str(), dir.c_str());
}

}  // namespace weft
