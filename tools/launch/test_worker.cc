// Scripted worker for launcher_test: `test_worker <mode> [args]`.
//   env                 print the launcher's variables (stdout) and a stderr line
//   exit <rank> <code>  that rank exits with <code> after 200 ms; others sleep
//   stubborn <code>     everyone ignores SIGTERM; rank 0 exits with <code>
//   sleep               print "ready" and sleep
//   slow_stop <ms>      print "ready"; on SIGTERM/SIGUSR1 take <ms> (a save),
//                       then exit with 128 + the signal, as a trainer does
//   fail_first <rank>   <rank> records its failure first but exits last (after
//                       1 s); the others record theirs 300 ms in and exit 4
//   partial             print a line without a trailing newline
//   collectives         gloo all_reduce/all_gather/barrier over the env's store
//   die <rank>          collectives where <rank> is SIGKILLed inside #3
//   hang <rank>         collectives where <rank> never issues #2
//   relaunch [args]     MaybeRelaunchSelf, then print rank and remaining args
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/env/init.h"
#include "core/base/status_macros.h"
#include "tools/launch/error_file.h"
#include "tools/launch/relaunch.h"

namespace {

int Rank() {
  const char* r = std::getenv("RANK");
  return r == nullptr ? -1 : std::atoi(r);
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "<unset>" : v;
}

absl::Status Collectives(int die_rank, int hang_rank) {
  using namespace weft;
  using namespace weft::comm;
  WEFT_ASSIGN_OR_RETURN(DistributedContext dist,
                        InitDistributedFromEnv({.timeout = absl::Seconds(3)}));
  ProcessGroup& pg = *dist.world;
  WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::FromFloats({1.0f * pg.rank(), 1.0f}, {2}));
  WEFT_RETURN_IF_ERROR(pg.AllReduce(t)->Wait());
  if (pg.rank() == hang_rank) absl::SleepFor(absl::Seconds(30));
  WEFT_RETURN_IF_ERROR(pg.AllReduce(t)->Wait());
  auto work = pg.AllReduce(t);
  if (pg.rank() == die_rank) ::raise(SIGKILL);
  WEFT_RETURN_IF_ERROR(work->Wait());
  WEFT_ASSIGN_OR_RETURN(Tensor all, Tensor::Zeros({2 * pg.size()}, DType::kF32));
  WEFT_RETURN_IF_ERROR(pg.AllGather(t, all)->Wait());
  WEFT_RETURN_IF_ERROR(pg.Barrier()->Wait());
  WEFT_ASSIGN_OR_RETURN(std::vector<float> v, t.ToFloats());
  std::printf("rank %d ok sum=%g count=%g\n", pg.rank(), v[0], v[1]);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  const int rank = Rank();
  if (mode == "env") {
    std::printf("rank=%s local_rank=%s world=%s local_world=%s group_rank=%s master=%s:%s "
                "launcher_store=%s omp=%s launched=%s\n",
                Env("RANK").c_str(), Env("LOCAL_RANK").c_str(), Env("WORLD_SIZE").c_str(),
                Env("LOCAL_WORLD_SIZE").c_str(), Env("GROUP_RANK").c_str(),
                Env("MASTER_ADDR").c_str(), Env("MASTER_PORT").c_str(),
                Env("WEFT_LAUNCHER_STORE").c_str(), Env("OMP_NUM_THREADS").c_str(),
                Env("WEFT_LAUNCHED").c_str());
    std::fprintf(stderr, "stderr line from %d\n", rank);
    return 0;
  }
  if (mode == "exit" && argc >= 4) {
    if (rank == std::atoi(argv[2])) {
      usleep(200 * 1000);
      return std::atoi(argv[3]);
    }
    sleep(30);
    return 0;
  }
  if (mode == "stubborn" && argc >= 3) {
    signal(SIGTERM, SIG_IGN);
    if (rank == 0) {
      usleep(200 * 1000);
      return std::atoi(argv[2]);
    }
    sleep(30);
    return 0;
  }
  if (mode == "sleep") {
    std::printf("ready\n");
    sleep(30);
    return 0;
  }
  if (mode == "slow_stop" && argc >= 3) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    std::printf("ready\n");
    int sig = 0;
    sigwait(&set, &sig);
    usleep(std::atoi(argv[2]) * 1000);
    return 128 + sig;
  }
  if (mode == "fail_first" && argc >= 3) {
    if (rank == std::atoi(argv[2])) {
      weft::launch::RecordFailure(absl::StrCat("error: the root cause, on rank ", rank));
      usleep(1000 * 1000);
      return 3;
    }
    usleep(300 * 1000);
    weft::launch::RecordFailure(absl::StrCat("error: connection closed (rank ", rank, ")"));
    return 4;
  }
  if (mode == "partial") {
    std::printf("no newline at end");
    std::fflush(stdout);
    return 0;
  }
  if (mode == "collectives" || mode == "die" || mode == "hang") {
    const int target = argc >= 3 ? std::atoi(argv[2]) : -1;
    absl::Status s = Collectives(mode == "die" ? target : -1, mode == "hang" ? target : -1);
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
      return 1;
    }
    return 0;
  }
  if (mode == "relaunch") {
    auto relaunch = weft::launch::MaybeRelaunchSelf(&argc, argv);
    if (!relaunch.ok()) {
      std::fprintf(stderr, "%s\n", relaunch.status().ToString().c_str());
      return 2;
    }
    if (relaunch->relaunched) {
      std::printf("launcher done with %d\n", relaunch->exit_code);
      return relaunch->exit_code;
    }
    std::vector<std::string> rest(argv + 1, argv + argc);
    std::printf("worker rank=%d args=%s\n", rank, absl::StrJoin(rest, " ").c_str());
    std::fflush(stdout);
    // Rank 1 fails, and the launcher then stops the other ranks: rank 1
    // waits (at most 10 s) until rank 0 has printed, so the test always sees
    // rank 0's line instead of racing the teardown.
    const std::string marker = absl::StrCat(Env("TEST_TMPDIR"), "/relaunch_rank0_printed");
    if (rank == 0 && std::getenv("TEST_TMPDIR") != nullptr) {
      if (FILE* f = std::fopen(marker.c_str(), "w")) std::fclose(f);
    }
    if (rank == 1) {
      for (int i = 0; i < 1000 && ::access(marker.c_str(), F_OK) != 0; ++i) ::usleep(10000);
    }
    return rank == 1 ? 5 : 0;
  }
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
