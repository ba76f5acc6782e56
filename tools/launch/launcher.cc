#include "tools/launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/env/outer_launcher.h"
#include "comm/store/tcp_store_server.h"
#include "comm/store/tcp_store_wire.h"
#include "comm/util/deadline.h"
#include "comm/util/socket.h"
#include "core/base/errors.h"
#include "tools/launch/error_file.h"
#include "tools/launch/line_prefixer.h"

extern char** environ;

namespace weft::launch {
namespace {

using comm::Deadline;

constexpr int kHandledSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD};
int g_signal_pipe = -1;  // write end; the handler only writes to it

void OnSignal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  (void)!::write(g_signal_pipe, &byte, 1);
  errno = saved;
}

// Installs the handlers for the duration of Launch and restores the old ones.
class SignalRelay {
 public:
  SignalRelay() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
      read_fd_ = fds[0];
      write_fd_ = fds[1];
    }
    g_signal_pipe = write_fd_;
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < std::size(kHandledSignals); ++i) {
      sigaction(kHandledSignals[i], &sa, &old_[i]);
    }
  }
  ~SignalRelay() {
    for (size_t i = 0; i < std::size(kHandledSignals); ++i) {
      sigaction(kHandledSignals[i], &old_[i], nullptr);
    }
    g_signal_pipe = -1;
    ::close(read_fd_);
    ::close(write_fd_);
  }
  int read_fd() const { return read_fd_; }

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  struct sigaction old_[std::size(kHandledSignals)];
};

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
  std::unique_ptr<LinePrefixer> out;
  std::unique_ptr<LinePrefixer> err;
  bool exited = false;
  int exit_code = 0;  // 128 + signal when killed
  int64_t exit_unix_ns = 0;  // when the launcher reaped it
  std::string error_file;    // its WEFT_ERROR_FILE (error_file.h); "" for none
};

// A directory for the workers' error files, removed with it.
class ErrorDir {
 public:
  ErrorDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                       "/weft-launch-XXXXXX");
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ErrorDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  // "" when the directory could not be made: the workers then get none.
  std::string FileFor(int rank) const {
    return path_.empty() ? "" : absl::StrCat(path_, "/rank_", rank);
  }

 private:
  std::string path_;
};

void Note(absl::string_view message) { WriteAll(2, absl::StrCat("[launch] ", message, "\n")); }

std::string DescribeExit(int wstatus) {
  if (WIFSIGNALED(wstatus)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(wstatus), " (",
                        strsignal(WTERMSIG(wstatus)), ")");
  }
  return absl::StrCat("exited with code ", WEXITSTATUS(wstatus));
}

// 128 random bits as hex, from the kernel.
absl::StatusOr<std::string> RandomToken() {
  unsigned char bytes[16];
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FailedPrecondition("cannot open /dev/urandom", "a readable /dev/urandom");
  const ssize_t n = ::read(fd, bytes, sizeof(bytes));
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof(bytes))) {
    return FailedPrecondition("a short read from /dev/urandom", "16 random bytes");
  }
  std::string out;
  for (unsigned char b : bytes) absl::StrAppend(&out, absl::Hex(b, absl::kZeroPad2));
  return out;
}

// The environment every worker shares; RANK and LOCAL_RANK are added per worker.
std::map<std::string, std::string> BaseEnvironment(const LaunchOptions& o, int port) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env[std::string(*e, eq - *e)] = eq + 1;
  }
  env["WORLD_SIZE"] = absl::StrCat(o.world_size());
  env["LOCAL_WORLD_SIZE"] = absl::StrCat(o.nproc_per_node);
  env["GROUP_RANK"] = absl::StrCat(o.node_rank);
  env["GROUP_WORLD_SIZE"] = absl::StrCat(o.nnodes);
  env["MASTER_ADDR"] = o.master_addr;
  env["MASTER_PORT"] = absl::StrCat(port);
  if (o.host_store) {
    env["WEFT_LAUNCHER_STORE"] = "1";
  } else {
    env.erase("WEFT_LAUNCHER_STORE");
  }
  env.erase("TORCHELASTIC_USE_AGENT_STORE");
  // For the banner: "via weft launch" rather than "via torchrun".
  env["WEFT_LAUNCHED"] = "1";
  return env;
}

// fork + exec one worker with its output on two pipes.
absl::Status Spawn(const std::vector<std::string>& command,
                   std::map<std::string, std::string> env, Worker& w) {
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(absl::StrCat(k, "=", v));
  // Everything the child needs is prepared before fork: between fork and
  // exec only async-signal-safe calls are allowed.
  std::vector<char*> envp, argv;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = command;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string exec_error =
      absl::StrCat("[launch] cannot execute '", command[0], "'\n");
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    return Internal("pipe2 failed: " + comm::ErrnoMessage(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return Internal("fork failed: " + comm::ErrnoMessage(errno));
  if (pid == 0) {
    ::setpgid(0, 0);  // own process group: terminal signals reach only the launcher
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE}) {
      sigaction(sig, &dfl, nullptr);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execvpe(argv[0], argv.data(), envp.data());
    (void)!::write(2, exec_error.data(), exec_error.size());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so the group exists before we signal it
  ::close(out[1]);
  ::close(err[1]);
  w.pid = pid;
  w.out_fd = out[0];
  w.err_fd = err[0];
  return absl::OkStatus();
}

class Supervisor {
 public:
  Supervisor(const LaunchOptions& options, std::vector<Worker>& workers, int signal_fd)
      : options_(options), workers_(workers), signal_fd_(signal_fd) {}

  int Run();

 private:
  void Reap();
  void OnWorkerExit(Worker& w, int wstatus);
  void SignalLive(int sig);
  void OnLauncherSignal(int sig);
  // When a worker other than the first one reaped failed first, by the
  // time it recorded (error_file.h) or else its exit's: names it and its
  // error, which the other ranks' errors only echo.
  void NoteEarliestFailure() const;
  int LiveCount() const;

  const LaunchOptions& options_;
  std::vector<Worker>& workers_;
  const int signal_fd_;
  std::optional<int> first_failure_;  // exit code of the first failed worker
  int first_failed_rank_ = -1;
  int launcher_signal_ = 0;
  std::optional<Deadline> kill_at_;   // SIGKILL whatever is left then
  absl::Duration kill_grace_;         // how long before kill_at_ it was set
  std::optional<Deadline> drain_until_;
};

int Supervisor::LiveCount() const {
  int live = 0;
  for (const Worker& w : workers_) live += w.exited ? 0 : 1;
  return live;
}

void Supervisor::SignalLive(int sig) {
  for (const Worker& w : workers_) {
    if (!w.exited) ::kill(-w.pid, sig);
  }
}

void Supervisor::OnWorkerExit(Worker& w, int wstatus) {
  w.exited = true;
  w.exit_code = WIFSIGNALED(wstatus) ? 128 + WTERMSIG(wstatus) : WEXITSTATUS(wstatus);
  w.exit_unix_ns = absl::ToUnixNanos(absl::Now());
  if (w.exit_code == 0 || first_failure_.has_value() || launcher_signal_ != 0) return;
  first_failure_ = w.exit_code;
  first_failed_rank_ = w.rank;
  const int others = LiveCount();
  Note(absl::StrCat("rank ", w.rank, " ", DescribeExit(wstatus),
                    others > 0 ? absl::StrCat("; stopping the other ", others, " worker(s)") : ""));
  if (options_.output == OutputMode::kRank0 && w.rank != 0) {
    // Its output was hidden: show how it ended.
    w.err->Finish();
    for (const std::string& line : w.err->last_lines()) {
      WriteAll(2, absl::StrCat("[rank ", w.rank, "] ", line, "\n"));
    }
  }
  if (others > 0) {
    SignalLive(SIGTERM);
    kill_at_ = Deadline::After(options_.teardown_grace);
    kill_grace_ = options_.teardown_grace;
  }
}

void Supervisor::Reap() {
  for (Worker& w : workers_) {
    if (w.exited) continue;
    int wstatus = 0;
    const pid_t r = ::waitpid(w.pid, &wstatus, WNOHANG);
    if (r == w.pid) OnWorkerExit(w, wstatus);
  }
}

void Supervisor::OnLauncherSignal(int sig) {
  if (sig == SIGUSR2) {
    // Not a stop: each worker writes its flight recorder and goes on.
    Note("got SIGUSR2; forwarding it to the workers, which dump their flight recorders");
    SignalLive(sig);
    return;
  }
  if (launcher_signal_ != 0 && sig == SIGINT) {
    Note("second interrupt: killing the workers");
    SignalLive(SIGKILL);
    return;
  }
  if (launcher_signal_ == 0) launcher_signal_ = sig;
  Note(absl::StrCat("got ", strsignal(sig), "; forwarding it to the workers"));
  SignalLive(sig);
  // SIGTERM and SIGUSR1 ask trainers to save and stop (--save_on_signal),
  // which takes a step and a checkpoint; SIGINT and SIGHUP end them now.
  const bool stop = sig == SIGTERM || sig == SIGUSR1;
  if (!kill_at_.has_value()) {
    kill_at_ = Deadline::After(stop ? options_.stop_grace : options_.teardown_grace);
    kill_grace_ = stop ? options_.stop_grace : options_.teardown_grace;
  }
}

void Supervisor::NoteEarliestFailure() const {
  const Worker* earliest = nullptr;
  int64_t earliest_ns = 0;
  std::string message;
  for (const Worker& w : workers_) {
    if (w.exit_code == 0) continue;
    const std::optional<RecordedFailure> f =
        w.error_file.empty() ? std::nullopt : ReadFailure(w.error_file);
    const int64_t at = f.has_value() ? f->unix_ns : w.exit_unix_ns;
    if (earliest == nullptr || at < earliest_ns) {
      earliest = &w;
      earliest_ns = at;
      message = f.has_value() ? f->message : "";
    }
  }
  if (earliest == nullptr || earliest->rank == first_failed_rank_) return;
  constexpr size_t kMaxMessage = 2000;
  if (message.size() > kMaxMessage) message = message.substr(0, kMaxMessage) + "...";
  Note(absl::StrCat("the first rank to fail was rank ", earliest->rank, " (exit code ",
                    earliest->exit_code, "), before rank ", first_failed_rank_,
                    message.empty() ? ""
                                    : absl::StrCat(":\n", absl::StripTrailingAsciiWhitespace(message))));
}

int Supervisor::Run() {
  std::vector<pollfd> fds;
  std::vector<std::pair<Worker*, bool>> owners;  // (worker, is_stderr)
  while (true) {
    Reap();
    fds.clear();
    owners.clear();
    fds.push_back({signal_fd_, POLLIN, 0});
    for (Worker& w : workers_) {
      if (w.out_fd >= 0) {
        fds.push_back({w.out_fd, POLLIN, 0});
        owners.emplace_back(&w, false);
      }
      if (w.err_fd >= 0) {
        fds.push_back({w.err_fd, POLLIN, 0});
        owners.emplace_back(&w, true);
      }
    }
    const int live = LiveCount();
    if (live == 0 && !drain_until_.has_value()) {
      // Grandchildren may hold the pipes open; do not wait on them forever.
      drain_until_ = Deadline::After(absl::Seconds(1));
    }
    if (owners.empty() && live == 0) break;
    if (drain_until_.has_value() && drain_until_->Expired()) break;
    int timeout_ms = 200;  // also catches coalesced SIGCHLDs
    if (kill_at_.has_value() && live > 0) {
      if (kill_at_->Expired()) {
        std::vector<int> ranks;
        for (const Worker& w : workers_) {
          if (!w.exited) ranks.push_back(w.rank);
        }
        Note(absl::StrCat("killing ", live, " worker(s) that did not stop within ",
                          absl::FormatDuration(kill_grace_), ": rank",
                          ranks.size() > 1 ? "s " : " ", absl::StrJoin(ranks, ", ")));
        SignalLive(SIGKILL);
        kill_at_.reset();
      } else {
        timeout_ms = std::min<int>(timeout_ms, kill_at_->PollMillis());
      }
    }
    const int rc = ::poll(fds.data(), fds.size(), timeout_ms);
    if (rc < 0 && errno != EINTR) break;
    if (rc <= 0) continue;
    if (fds[0].revents & POLLIN) {
      unsigned char sigs[64];
      const ssize_t n = ::read(signal_fd_, sigs, sizeof(sigs));
      for (ssize_t i = 0; i < n; ++i) {
        if (sigs[i] != SIGCHLD) OnLauncherSignal(sigs[i]);
      }
    }
    for (size_t i = 0; i < owners.size(); ++i) {
      if (!(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [w, is_err] = owners[i];
      int& fd = is_err ? w->err_fd : w->out_fd;
      char buf[65536];
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n > 0) {
        (is_err ? w->err : w->out)->Feed(absl::string_view(buf, static_cast<size_t>(n)));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        (is_err ? w->err : w->out)->Finish();
        ::close(fd);
        fd = -1;
      }
    }
  }
  for (Worker& w : workers_) {
    w.out->Finish();
    w.err->Finish();
    if (w.out_fd >= 0) ::close(w.out_fd);
    if (w.err_fd >= 0) ::close(w.err_fd);
  }
  if (first_failure_.has_value()) {
    NoteEarliestFailure();
    return *first_failure_;
  }
  if (launcher_signal_ != 0) return 128 + launcher_signal_;
  for (const Worker& w : workers_) {
    if (w.exit_code != 0) return w.exit_code;  // failed while the launcher was stopping
  }
  return 0;
}

}  // namespace

absl::StatusOr<int> Launch(const LaunchOptions& options, const std::vector<std::string>& command) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  if (command.empty() || command[0].empty()) {
    return InvalidArgument("no program to launch", "launch [flags] -- <program> [args]");
  }
  // Under srun -n 2 / mpirun -np 2 each task would otherwise start its own job.
  if (absl::Status s = comm::CheckLaunchInsideOuterLauncher(options.nproc_per_node,
                                                            options.nnodes, comm::ProcessEnv());
      !s.ok()) {
    return s;
  }
  // One secret per job: the store answers only hellos that carry it, so a
  // local process that knows the protocol cannot read or write its keys.
  // One node makes its own; several must share one the user sets.
  std::string token;
  if (const char* t = std::getenv(comm::wire::kTokenEnv); t != nullptr) token = t;
  if (token.empty() && options.nnodes == 1) {
    auto made = RandomToken();
    if (!made.ok()) return Annotate(made.status(), "making the job's store token");
    token = *made;
  }
  if (token.empty()) {
    Note(absl::StrCat("--nnodes > 1 without ", comm::wire::kTokenEnv,
                      ": the job's store accepts any client that reaches its port; set the same ",
                      comm::wire::kTokenEnv, " (e.g. openssl rand -hex 16) on every node"));
  }
  // Node 0 hosts the store so workers can start in any order, and so a free
  // port can be picked here and handed to everyone.
  std::unique_ptr<comm::TcpStoreServer> store;
  int port = options.master_port;
  if (options.host_store && options.node_rank == 0) {
    auto server = comm::TcpStoreServer::Start(
        {.host = comm::IsLoopbackHost(options.master_addr) ? options.master_addr : "",
         .port = port,
         .world_size = options.world_size(),
         .token = token});
    if (!server.ok()) return Annotate(server.status(), "the launcher hosting the job's store");
    store = std::move(*server);
    port = store->port();
  } else if (port == 0) {
    auto probe = comm::ListenTcp(options.master_addr, 0);
    if (!probe.ok()) return probe.status();
    auto free_port = comm::LocalPort(probe->get());
    if (!free_port.ok()) return free_port.status();
    port = *free_port;  // rank 0 binds it; a tiny race with other programs
  }

  if (options.nnodes > 1 && comm::IsLoopbackHost(options.master_addr)) {
    Note("--nnodes > 1 with a loopback --master_addr: every \"node\" must be this host; on a "
         "cluster pass node 0's hostname");
  }
  SignalRelay relay;
  std::map<std::string, std::string> env = BaseEnvironment(options, port);
  if (!token.empty()) env[comm::wire::kTokenEnv] = token;
  if (options.nproc_per_node > 1 && env.find("OMP_NUM_THREADS") == env.end()) {
    env["OMP_NUM_THREADS"] = "1";
    Note("setting OMP_NUM_THREADS=1 for each worker (as torchrun does); set it to override");
  }
  std::vector<Worker> workers(options.nproc_per_node);
  const ErrorDir error_dir;
  for (int local = 0; local < options.nproc_per_node; ++local) {
    Worker& w = workers[local];
    w.rank = options.node_rank * options.nproc_per_node + local;
    w.error_file = error_dir.FileFor(w.rank);
    if (w.error_file.empty()) {
      env.erase(kErrorFileEnv);
    } else {
      env[kErrorFileEnv] = w.error_file;
    }
    const bool raw = options.output == OutputMode::kRaw;
    const std::string prefix = raw ? "" : absl::StrCat("[rank ", w.rank, "] ");
    const bool show = options.output != OutputMode::kRank0 || w.rank == 0;
    w.out = std::make_unique<LinePrefixer>(prefix, 1, show, 0);
    w.err = std::make_unique<LinePrefixer>(prefix, 2, show, 20);
    env["RANK"] = absl::StrCat(w.rank);
    env["LOCAL_RANK"] = absl::StrCat(local);
    env["ROLE_RANK"] = absl::StrCat(w.rank);
    if (absl::Status s = Spawn(command, env, w); !s.ok()) {
      for (Worker& started : workers) {
        if (started.pid > 0) ::kill(-started.pid, SIGKILL);
      }
      for (Worker& started : workers) {
        if (started.pid > 0) ::waitpid(started.pid, nullptr, 0);
      }
      return s;
    }
  }
  return Supervisor(options, workers, relay.read_fd()).Run();
}

}  // namespace weft::launch
