// Run a function as N ranks, as threads of this process or as forked
// processes, each with a shared store and a deadline, and collect how every
// rank ended. Built for tests of anything that communicates: comm's own
// tests, and the strategy parity tests that compare N-rank training with a
// single process.
//
//   std::vector<RankResult> results = RunRanks(RankMode::kProcesses, 4,
//       [](const RankContext& ctx) -> absl::Status {
//         WEFT_ASSIGN_OR_RETURN(auto pg, ctx.NewGroup("gloo"));
//         Tensor t = ...;
//         WEFT_RETURN_IF_ERROR(pg->AllReduce(t)->Wait());
//         return ExpectFloats(t, {...}, "sum");   // expect.h
//       });
//   EXPECT_TRUE(AllRanksOk(results).ok()) << AllRanksOk(results);
//
// The rank function returns a Status; a failed gtest EXPECT/ASSERT inside it
// also fails the rank (processes report it through their exit code, threads
// through gtest itself). RankResult records each rank's status, exit code,
// signal and whether it was killed at the deadline, so tests can also check
// how ranks fail (e.g. that survivors of a killed rank report an error).
//
// Processes: the parent hosts a TcpStore server on a free loopback port
// (ranks connect as clients, like real jobs) and forks the children before
// starting any thread of its own; call RunRanks from a single-threaded
// test body. Children end with _exit, so they never run the parent's
// destructors or gtest's teardown. Ranks still running at the deadline are
// killed with SIGKILL.
// Threads: ranks share one HashStore. Threads cannot be killed, so the
// deadline is only reported; every comm op has its own timeout anyway.
#ifndef WEFT_COMM_TESTING_MULTIPROCESS_H_
#define WEFT_COMM_TESTING_MULTIPROCESS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/process_group/options.h"
#include "comm/process_group/process_group.h"
#include "comm/store/store.h"

namespace weft::comm::testing {

struct RankContext {
  int rank = 0;
  int world_size = 1;
  // Shared by all ranks of the run.
  std::shared_ptr<Store> store;
  // The run's op timeout, handy for options.
  absl::Duration timeout = absl::Seconds(30);

  // A process group of all ranks on `store` (every rank must call it with
  // the same name). options.timeout defaults to `timeout`.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> NewGroup(
      absl::string_view backend = "gloo", ProcessGroupOptions options = {}) const;
};

using RankFn = std::function<absl::Status(const RankContext&)>;

struct RankResult {
  int rank = 0;
  // What the function returned, or why the rank failed otherwise.
  absl::Status status;
  // Processes only: exit code (-1 when killed by a signal) and signal.
  int exit_code = 0;
  int signal = 0;
  // The rank was still running at the deadline (processes: then killed).
  bool timed_out = false;
  // From the start of the run until this rank ended.
  absl::Duration elapsed;
};

enum class RankMode { kThreads, kProcesses };

absl::string_view RankModeName(RankMode mode);  // "threads", "processes"

struct RunOptions {
  // Bound on the whole run.
  absl::Duration deadline = absl::Seconds(60);
  // Store timeout, and RankContext::timeout for groups.
  absl::Duration timeout = absl::Seconds(20);
};

std::vector<RankResult> RunRanks(RankMode mode, int world_size, const RankFn& fn,
                                 const RunOptions& options = {});
std::vector<RankResult> RunRanksInThreads(int world_size, const RankFn& fn,
                                          const RunOptions& options = {});
std::vector<RankResult> RunRanksInProcesses(int world_size, const RankFn& fn,
                                            const RunOptions& options = {});

// OK when every rank succeeded; otherwise one error listing each failed
// rank and its message.
absl::Status AllRanksOk(const std::vector<RankResult>& results);

}  // namespace weft::comm::testing

#endif  // WEFT_COMM_TESTING_MULTIPROCESS_H_
