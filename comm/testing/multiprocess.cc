#include "comm/testing/multiprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/process_group/registry.h"
#include "comm/store/hash_store.h"
#include "comm/store/tcp_store.h"
#include "comm/store/tcp_store_server.h"
#include "comm/util/deadline.h"
#include "gtest/gtest.h"

namespace weft::comm::testing {
namespace {

using Clock = std::chrono::steady_clock;

absl::Duration Since(Clock::time_point start) { return absl::FromChrono(Clock::now() - start); }

absl::Status RunGuarded(const RankFn& fn, const RankContext& ctx) {
  try {
    return fn(ctx);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("rank ", ctx.rank, " threw: ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat("rank ", ctx.rank, " threw a non-std exception"));
  }
}

// "<code>\n<message>" through the result pipe.
std::string EncodeStatus(const absl::Status& s) {
  return absl::StrCat(static_cast<int>(s.code()), "\n", s.message());
}

absl::Status DecodeStatus(const std::string& text) {
  const size_t nl = text.find('\n');
  int code = 0;
  if (nl == std::string::npos || !absl::SimpleAtoi(text.substr(0, nl), &code)) {
    return absl::InternalError("unreadable status from rank: " + text);
  }
  return absl::Status(static_cast<absl::StatusCode>(code), text.substr(nl + 1));
}

[[noreturn]] void ChildMain(int rank, int world_size, int port, const RankFn& fn,
                            const RunOptions& options, int result_fd) {
  absl::Status status;
  auto store = TcpStore::Create({.host = "127.0.0.1",
                                 .port = port,
                                 .world_size = world_size,
                                 .rank = rank,
                                 .timeout = options.timeout,
                                 .connect_timeout = options.timeout});
  if (!store.ok()) {
    status = store.status();
  } else {
    RankContext ctx{rank, world_size, *store, options.timeout};
    status = RunGuarded(fn, ctx);
  }
  if (status.ok() && ::testing::Test::HasFailure()) {
    status = absl::InternalError(absl::StrCat("a gtest expectation failed in rank ", rank,
                                              "; see its output above"));
  }
  const std::string encoded = EncodeStatus(status);
  size_t done = 0;
  while (done < encoded.size()) {
    const ssize_t n = ::write(result_fd, encoded.data() + done, encoded.size() - done);
    if (n <= 0 && errno != EINTR) break;
    if (n > 0) done += static_cast<size_t>(n);
  }
  std::cout.flush();
  std::fflush(nullptr);
  ::_exit(status.ok() ? 0 : 1);
}

}  // namespace

absl::StatusOr<std::shared_ptr<ProcessGroup>> RankContext::NewGroup(
    absl::string_view backend, ProcessGroupOptions options) const {
  if (options.timeout == ProcessGroupOptions().timeout) options.timeout = timeout;
  return CreateProcessGroup(backend, store, rank, world_size, options);
}

absl::string_view RankModeName(RankMode mode) {
  return mode == RankMode::kThreads ? "threads" : "processes";
}

std::vector<RankResult> RunRanks(RankMode mode, int world_size, const RankFn& fn,
                                 const RunOptions& options) {
  return mode == RankMode::kThreads ? RunRanksInThreads(world_size, fn, options)
                                    : RunRanksInProcesses(world_size, fn, options);
}

std::vector<RankResult> RunRanksInThreads(int world_size, const RankFn& fn,
                                          const RunOptions& options) {
  auto store = std::make_shared<HashStore>(options.timeout);
  std::vector<RankResult> results(world_size);
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      RankContext ctx{r, world_size, store, options.timeout};
      results[r].rank = r;
      results[r].status = RunGuarded(fn, ctx);
      results[r].elapsed = Since(start);
      results[r].exit_code = results[r].status.ok() ? 0 : 1;
    });
  }
  for (auto& t : threads) t.join();
  for (RankResult& r : results) r.timed_out = r.elapsed > options.deadline;
  return results;
}

std::vector<RankResult> RunRanksInProcesses(int world_size, const RankFn& fn,
                                            const RunOptions& options) {
  std::vector<RankResult> results(world_size);
  for (int r = 0; r < world_size; ++r) results[r].rank = r;
  auto fail_all = [&](const absl::Status& s) {
    for (RankResult& r : results) {
      r.status = s;
      r.exit_code = -1;
    }
    return results;
  };
  // Bound but not serving: the parent must still be single-threaded at fork.
  auto server = TcpStoreServer::Listen({.host = "127.0.0.1", .port = 0, .world_size = world_size});
  if (!server.ok()) return fail_all(server.status());
  const int port = (*server)->port();

  std::cout.flush();
  std::fflush(nullptr);
  std::vector<pid_t> pids(world_size, -1);
  std::vector<int> read_fds(world_size, -1);
  std::vector<std::string> messages(world_size);
  const auto start = Clock::now();
  for (int r = 0; r < world_size; ++r) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return fail_all(absl::InternalError("pipe2 failed"));
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      ::close((*server)->listen_fd());
      for (int fd : read_fds) {
        if (fd >= 0) ::close(fd);
      }
      ChildMain(r, world_size, port, fn, options, fds[1]);
    }
    ::close(fds[1]);
    if (pid < 0) {
      ::close(fds[0]);
      results[r].status = absl::InternalError("fork failed");
      results[r].exit_code = -1;
      continue;
    }
    pids[r] = pid;
    read_fds[r] = fds[0];
  }
  if (absl::Status s = (*server)->Serve(); !s.ok()) {
    for (pid_t pid : pids) {
      if (pid > 0) ::kill(pid, SIGKILL);
    }
  }

  const Deadline deadline = Deadline::After(options.deadline);
  std::vector<bool> reaped(world_size, false);
  for (int r = 0; r < world_size; ++r) reaped[r] = pids[r] < 0;
  auto drain = [&](int r, bool until_eof) {
    char buf[4096];
    while (read_fds[r] >= 0) {
      pollfd p{read_fds[r], POLLIN, 0};
      if (!until_eof && ::poll(&p, 1, 0) <= 0) return;
      const ssize_t n = ::read(read_fds[r], buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(read_fds[r]);
        read_fds[r] = -1;
        return;
      }
      messages[r].append(buf, static_cast<size_t>(n));
    }
  };
  auto record_exit = [&](int r, int wstatus) {
    reaped[r] = true;
    results[r].elapsed = Since(start);
    if (WIFEXITED(wstatus)) {
      results[r].exit_code = WEXITSTATUS(wstatus);
    } else if (WIFSIGNALED(wstatus)) {
      results[r].exit_code = -1;
      results[r].signal = WTERMSIG(wstatus);
    }
  };
  while (true) {
    bool all_done = true;
    for (int r = 0; r < world_size; ++r) {
      if (reaped[r]) continue;
      drain(r, false);
      int wstatus = 0;
      if (::waitpid(pids[r], &wstatus, WNOHANG) == pids[r]) {
        record_exit(r, wstatus);
      } else {
        all_done = false;
      }
    }
    if (all_done) break;
    if (deadline.Expired()) {
      for (int r = 0; r < world_size; ++r) {
        if (reaped[r]) continue;
        ::kill(pids[r], SIGKILL);
        int wstatus = 0;
        ::waitpid(pids[r], &wstatus, 0);
        record_exit(r, wstatus);
        results[r].timed_out = true;
      }
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  (*server)->Stop();

  for (int r = 0; r < world_size; ++r) {
    if (pids[r] < 0) continue;
    drain(r, true);
    RankResult& res = results[r];
    if (res.timed_out) {
      res.status = absl::DeadlineExceededError(absl::StrCat(
          "rank ", r, " was still running after ", absl::FormatDuration(options.deadline),
          " and was killed"));
    } else if (!messages[r].empty()) {
      res.status = DecodeStatus(messages[r]);
    } else if (res.signal != 0) {
      res.status = absl::InternalError(
          absl::StrCat("rank ", r, " was killed by signal ", res.signal, " (", strsignal(res.signal), ")"));
    } else {
      res.status = absl::InternalError(
          absl::StrCat("rank ", r, " exited with code ", res.exit_code, " without a status"));
    }
  }
  return results;
}

absl::Status AllRanksOk(const std::vector<RankResult>& results) {
  std::vector<std::string> failures;
  for (const RankResult& r : results) {
    if (!r.status.ok() || r.timed_out) {
      failures.push_back(absl::StrCat("rank ", r.rank, ": ", r.status.ToString()));
    }
  }
  if (failures.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(failures.size(), " of ", results.size(),
                                          " ranks failed:\n", absl::StrJoin(failures, "\n")));
}

}  // namespace weft::comm::testing
