// The launcher binary end to end, driving test_worker: environment, output
// modes, exit codes, teardown, signals, collectives over the launcher's
// store, and a job that loses a rank.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace {

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
  double seconds = 0;
};

std::string Runfile(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"),
                      "/tools/launch/", name);
}

// Runs argv, collecting output; `on_output` sees stdout as it grows and may
// signal the process (by pid). Kills it after `timeout`.
Result RunCommand(const std::vector<std::string>& args, absl::Duration timeout = absl::Seconds(40),
           const std::function<void(pid_t, const std::string&)>& on_output = nullptr) {
  int out[2], err[2];
  EXPECT_EQ(::pipe(out), 0);
  EXPECT_EQ(::pipe(err), 0);
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::close(out[0]);
    ::close(err[0]);
    ::execv(argv[0], argv.data());
    ::_exit(126);
  }
  ::close(out[1]);
  ::close(err[1]);
  Result r;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open = 2;
  const auto deadline = start + absl::ToChronoMilliseconds(timeout);
  while (open > 0 && std::chrono::steady_clock::now() < deadline) {
    if (::poll(fds, 2, 100) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
        continue;
      }
      (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      if (i == 0 && on_output) on_output(pid, r.out);
    }
  }
  if (open > 0) ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  for (int i = 0; i < 2; ++i) {
    if (fds[i].fd >= 0) ::close(fds[i].fd);
  }
  return r;
}

std::vector<std::string> Launch(std::vector<std::string> flags, std::vector<std::string> worker) {
  std::vector<std::string> args = {Runfile("launch")};
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back("--");
  args.push_back(Runfile("test_worker"));
  args.insert(args.end(), worker.begin(), worker.end());
  return args;
}

TEST(LauncherTest, SetsTheTorchrunEnvironmentAndPrefixesLines) {
  Result r = RunCommand(Launch({"--nproc_per_node=3"}, {"env"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(absl::StrContains(
        r.out, absl::StrCat("[rank ", rank, "] rank=", rank, " local_rank=", rank,
                            " world=3 local_world=3 group_rank=0 master=127.0.0.1:")))
        << r.out;
    EXPECT_TRUE(absl::StrContains(r.err, absl::StrCat("[rank ", rank, "] stderr line from ", rank)))
        << r.err;
  }
  EXPECT_TRUE(absl::StrContains(r.out, "launcher_store=1 omp=1 launched=1")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "master=127.0.0.1:0 ")) << "a real port is chosen";
}

TEST(LauncherTest, Rank0OutputShowsOnlyRankZero) {
  Result r = RunCommand(Launch({"--nproc_per_node=2", "--output=rank0"}, {"env"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "[rank 0] rank=0")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "[rank 1]")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.err, "[rank 1]")) << r.err;
}

TEST(LauncherTest, RawOutputAndPartialLines) {
  Result raw = RunCommand(Launch({"--nproc_per_node=1", "--output=raw"}, {"env"}));
  EXPECT_TRUE(absl::StartsWith(raw.out, "rank=0 ")) << raw.out;
  Result partial = RunCommand(Launch({"--nproc_per_node=1"}, {"partial"}));
  EXPECT_EQ(partial.out, "[rank 0] no newline at end\n");
}

TEST(LauncherTest, AFailedWorkerStopsTheOthersAndSetsTheExitCode) {
  Result r = RunCommand(Launch({"--nproc_per_node=3"}, {"exit", "1", "7"}));
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_LT(r.seconds, 10.0);  // the sleeping workers were torn down
  EXPECT_TRUE(absl::StrContains(r.err, "rank 1 exited with code 7; stopping the other 2 worker(s)"))
      << r.err;
}

// Rank 1 fails first but exits last; ranks 0 and 2 fail on its account and
// are reaped first. The launcher names rank 1 and its error at the end.
TEST(LauncherTest, NamesTheRankThatFailedFirstNotTheFirstReaped) {
  Result r = RunCommand(Launch({"--nproc_per_node=3", "--teardown_grace_s=5"}, {"fail_first", "1"}));
  EXPECT_EQ(r.exit_code, 4) << r.err;  // the first reaped worker's code
  EXPECT_TRUE(absl::StrContains(r.err, "the first rank to fail was rank 1 (exit code"))
      << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "error: the root cause, on rank 1")) << r.err;
  // One failure alone needs no such line.
  Result one = RunCommand(Launch({"--nproc_per_node=2"}, {"exit", "1", "7"}));
  EXPECT_FALSE(absl::StrContains(one.err, "the first rank to fail")) << one.err;
}

TEST(LauncherTest, WorkersIgnoringSigtermAreKilledAfterTheGrace) {
  Result r = RunCommand(Launch({"--nproc_per_node=2", "--teardown_grace_s=0.5"}, {"stubborn", "3"}));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_TRUE(absl::StrContains(r.err, "did not stop within")) << r.err;
}

TEST(LauncherTest, ForwardsSigtermToTheWorkers) {
  bool sent = false;
  Result r = RunCommand(Launch({"--nproc_per_node=2"}, {"sleep"}), absl::Seconds(40),
                 [&](pid_t pid, const std::string& out) {
                   if (!sent && absl::StrContains(out, "[rank 0] ready") &&
                       absl::StrContains(out, "[rank 1] ready")) {
                     ::kill(pid, SIGTERM);
                     sent = true;
                   }
                 });
  EXPECT_TRUE(sent);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_LT(r.seconds, 15.0);
  EXPECT_TRUE(absl::StrContains(r.err, "forwarding it to the workers")) << r.err;
}

// SIGTERM and SIGUSR1 ask trainers to save and stop, which takes longer
// than a teardown: they get --stop_grace_s, SIGINT only --teardown_grace_s.
Result SignalWhenReady(int sig, const std::vector<std::string>& flags) {
  bool sent = false;
  return RunCommand(Launch(flags, {"slow_stop", "1500"}), absl::Seconds(40),
                    [&](pid_t pid, const std::string& out) {
                      if (!sent && absl::StrContains(out, "[rank 0] ready") &&
                          absl::StrContains(out, "[rank 1] ready")) {
                        ::kill(pid, sig);
                        sent = true;
                      }
                    });
}

TEST(LauncherTest, StopSignalsWaitTheStopGraceNotTheTeardownGrace) {
  const std::vector<std::string> flags = {"--nproc_per_node=2", "--teardown_grace_s=0.3",
                                          "--stop_grace_s=20"};
  for (int sig : {SIGTERM, SIGUSR1}) {
    Result r = SignalWhenReady(sig, flags);
    EXPECT_EQ(r.exit_code, 128 + sig) << r.err;
    EXPECT_FALSE(absl::StrContains(r.err, "did not stop within")) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "forwarding it to the workers")) << r.err;
  }
  Result killed = SignalWhenReady(SIGTERM, {"--nproc_per_node=2", "--stop_grace_s=0.3"});
  EXPECT_TRUE(absl::StrContains(killed.err, "did not stop within 300ms")) << killed.err;
}

TEST(LauncherTest, MissingProgramIsExitCode127) {
  Result r = RunCommand({Runfile("launch"), "--nproc_per_node=2", "--", "/nonexistent/program"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_TRUE(absl::StrContains(r.err, "cannot execute '/nonexistent/program'")) << r.err;
}

TEST(LauncherTest, BadFlagsAreUsageErrors) {
  EXPECT_EQ(RunCommand({Runfile("launch"), "--nproc_per_node=0", "--", "true"}).exit_code, 2);
  EXPECT_EQ(RunCommand({Runfile("launch"), "--nproc_per_node=2"}).exit_code, 2);
  Result r = RunCommand({Runfile("launch"), "--nproc_per_node=2", "--nnodes=2", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "--master_port")) << r.err;
}

TEST(LauncherTest, CollectivesOverTheLaunchersStore) {
  Result r = RunCommand(Launch({"--nproc_per_node=4"}, {"collectives"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 3 all_reduces of (rank, 1): sum of ranks 6 -> 6*4*4 after 3 rounds.
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(absl::StrContains(r.out, absl::StrCat("[rank ", rank, "] rank ", rank,
                                                      " ok sum=96 count=64")))
        << r.out;
  }
}

// The job loses a rank in the middle of a collective: it must end soon,
// with the dead rank's status.
TEST(LauncherTest, AKilledRankEndsTheJob) {
  Result r = RunCommand(Launch({"--nproc_per_node=4"}, {"die", "2"}));
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
  EXPECT_LT(r.seconds, 3 + 8.0);
  EXPECT_TRUE(absl::StrContains(r.err, "rank 2 was killed by signal 9")) << r.err;
}

// A rank that never reaches a collective: the others time out with the rich
// error, and the launcher stops the straggler.
TEST(LauncherTest, AMissingRankTimesOutWithTheRichError) {
  Result r = RunCommand(Launch({"--nproc_per_node=4"}, {"hang", "3"}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_LT(r.seconds, 3 + 8.0);
  EXPECT_TRUE(absl::StrContains(r.err, "DEADLINE_EXCEEDED: all_reduce #2 (sum, f32[2] = 8 B) on "
                                       "group 'world'"))
      << r.err;
}

// The store's port is taken: the launch fails (exit 1, not the usage
// errors' 2) and says which port.
TEST(LauncherTest, AStorePortInUseIsALaunchFailure) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  Result r = RunCommand(Launch({"--nproc_per_node=2", "--master_addr=127.0.0.1",
                                absl::StrCat("--master_port=", port)},
                               {"collectives"}));
  ::close(fd);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, absl::StrCat(port))) << r.err;
}

// Two launchers on this host play two nodes of 2 workers each: node 0 hosts
// the store, global ranks follow the node rank.
TEST(LauncherTest, TwoNodesOnOneHost) {
  int port = 0;
  {
    // A free port for the job's store (node 0 binds it right after).
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
    ::close(fd);
  }
  auto node = [&](int node_rank) {
    return Launch({"--nproc_per_node=2", "--nnodes=2", absl::StrCat("--node_rank=", node_rank),
                   "--master_addr=127.0.0.1", absl::StrCat("--master_port=", port)},
                  {"collectives"});
  };
  Result node1;
  std::thread second([&] { node1 = RunCommand(node(1)); });
  Result node0 = RunCommand(node(0));
  second.join();
  ASSERT_EQ(node0.exit_code, 0) << node0.err;
  ASSERT_EQ(node1.exit_code, 0) << node1.err;
  EXPECT_TRUE(absl::StrContains(node0.out, "[rank 1] rank 1 ok sum=96 count=64")) << node0.out;
  EXPECT_TRUE(absl::StrContains(node1.out, "[rank 3] rank 3 ok sum=96 count=64")) << node1.out;
}

TEST(LauncherTest, ProgramsRelaunchThemselvesWithNprocPerNode) {
  // test_worker's rank 1 waits for this marker from rank 0 (see there).
  std::remove(absl::StrCat(std::getenv("TEST_TMPDIR"), "/relaunch_rank0_printed").c_str());
  Result r = RunCommand({Runfile("test_worker"), "relaunch", "--nproc_per_node=2", "--foo=bar", "x"});
  EXPECT_EQ(r.exit_code, 5) << r.err;  // rank 1's code
  EXPECT_TRUE(absl::StrContains(r.out, "[rank 0] worker rank=0 args=relaunch --foo=bar x")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "launcher done with 5")) << r.out;
  // Without the flag the program just runs.
  Result plain = RunCommand({Runfile("test_worker"), "relaunch", "y"});
  EXPECT_EQ(plain.exit_code, 0);
  EXPECT_EQ(plain.out, "worker rank=-1 args=relaunch y\n");
}

TEST(LauncherTest, RefusesToStartASeparateJobPerTaskOfAnSrunStep) {
  // srun -n 2 train --nproc_per_node=2: each task would run its own 2 ranks.
  setenv("SLURM_STEP_ID", "0", 1);
  setenv("SLURM_STEP_NUM_TASKS", "2", 1);
  Result self = RunCommand({Runfile("test_worker"), "relaunch", "--nproc_per_node=2", "x"});
  Result launch = RunCommand(Launch({"--nproc_per_node=2"}, {"env"}));
  // A single task that starts the workers of its node: the supported way.
  setenv("SLURM_STEP_NUM_TASKS", "1", 1);
  Result one_task = RunCommand(Launch({"--nproc_per_node=2"}, {"env"}));
  unsetenv("SLURM_STEP_ID");
  unsetenv("SLURM_STEP_NUM_TASKS");
  EXPECT_EQ(self.exit_code, 2) << self.out;
  EXPECT_TRUE(absl::StrContains(self.err, "--nproc_per_node=2 --nnodes=1 inside an srun step "
                                          "(SLURM_STEP_NUM_TASKS=2)"))
      << self.err;
  EXPECT_FALSE(absl::StrContains(self.out, "worker rank=")) << "no worker may start";
  EXPECT_NE(launch.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(launch.err, "srun -n/mpirun -np")) << launch.err;
  EXPECT_EQ(one_task.exit_code, 0) << one_task.err;
}

}  // namespace
