// Small POSIX socket helpers for the TCP store and the launcher: an owning
// fd, listening and connecting with deadlines, and whole-buffer send/recv.
// Every call that can block takes a Deadline; errors name the peer and errno.
#ifndef WEFT_COMM_UTIL_SOCKET_H_
#define WEFT_COMM_UTIL_SOCKET_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "comm/util/deadline.h"

namespace weft::comm {

// Owns a file descriptor; closes it on destruction.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.Release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

// "Connection refused (errno 111)".
std::string ErrnoMessage(int err);

// True for loopback names/addresses: "localhost", "127.x.y.z", "::1".
bool IsLoopbackHost(absl::string_view host);

// A listening TCP socket on `host` ("" or "0.0.0.0": all interfaces) and
// `port` (0: the kernel picks a free one; read it back with LocalPort).
absl::StatusOr<ScopedFd> ListenTcp(absl::string_view host, int port, int backlog = 1024);
absl::StatusOr<int> LocalPort(int fd);

// One connection attempt to host:port that gives up at `deadline`. The
// returned socket is blocking, with TCP_NODELAY set.
absl::StatusOr<ScopedFd> ConnectTcp(absl::string_view host, int port, const Deadline& deadline);

// Sends/receives exactly `size` bytes or fails: Unavailable when the peer
// closed the connection, DeadlineExceeded at the deadline.
absl::Status SendAll(int fd, const void* data, size_t size, const Deadline& deadline);
absl::Status RecvAll(int fd, void* data, size_t size, const Deadline& deadline);

// Sets O_NONBLOCK and FD_CLOEXEC.
absl::Status SetNonBlocking(int fd, bool on);
void SetCloseOnExec(int fd);

}  // namespace weft::comm

#endif  // WEFT_COMM_UTIL_SOCKET_H_
