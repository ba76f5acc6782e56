#include "checkpoint/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/errors.h"

namespace weft::ckpt {
namespace {

std::string HostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "an unknown host";
  return host;
}

// What the holder wrote: "pid 1234 on host h1 since 2026-11-27 10:01:02 UTC".
std::string ReadHolder(int fd) {
  char buf[512] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "a process that has not written its name yet";
  return std::string(absl::StripTrailingAsciiWhitespace(absl::string_view(buf, n)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DirLock>> DirLock::Acquire(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return FailedPrecondition(absl::StrCat("cannot create --checkpoint_dir=", dir, ": ", ec.message()),
                              "a directory this job can write");
  }
  const std::string path = absl::StrCat(dir, "/", kLockFile);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return FailedPrecondition(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)),
                              "a checkpoint directory this job can write");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      const std::string holder = ReadHolder(fd);
      ::close(fd);
      return FailedPrecondition(
          absl::StrCat("--checkpoint_dir=", dir, " is in use by another job (", holder, ")"),
          "one job per checkpoint directory: a second one would delete the first one's saves",
          "wait for that job to end (its lock goes with it), or give this one another "
          "--checkpoint_dir");
    }
    // NFS without a lock daemon, Lustre without -o flock: say so, go on.
    return std::unique_ptr<DirLock>(new DirLock(
        fd, absl::StrCat("--checkpoint_dir=", dir, " cannot be locked (", std::strerror(err),
                         "): a second job on the same directory would not be noticed")));
  }
  const std::string me =
      absl::StrCat("pid ", ::getpid(), " on host ", HostName(), " since ",
                   absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::Now(), absl::UTCTimeZone()));
  // The lock holds either way; a failed write only loses the name in the
  // next job's error.
  (void)!::ftruncate(fd, 0);
  (void)!::pwrite(fd, me.data(), me.size(), 0);
  return std::unique_ptr<DirLock>(new DirLock(fd, ""));
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace weft::ckpt
