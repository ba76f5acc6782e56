#include "comm/util/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft::comm {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* p) const { freeaddrinfo(p); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

absl::StatusOr<AddrInfoPtr> Resolve(absl::string_view host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  const std::string host_str(host);
  const std::string port_str = absl::StrCat(port);
  const int rc = getaddrinfo(host_str.empty() ? nullptr : host_str.c_str(), port_str.c_str(),
                             &hints, &result);
  if (rc != 0) {
    return Unavailable(absl::StrCat("cannot resolve host '", host, "': ", gai_strerror(rc)),
                       "a resolvable hostname or IP address",
                       "check MASTER_ADDR (or --master_addr) and DNS on this node");
  }
  return AddrInfoPtr(result);
}

}  // namespace

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) Reset(other.Release());
  return *this;
}

void ScopedFd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string ErrnoMessage(int err) {
  return absl::StrCat(std::strerror(err), " (errno ", err, ")");
}

bool IsLoopbackHost(absl::string_view host) {
  return host == "localhost" || absl::StartsWith(host, "127.") || host == "::1";
}

void SetCloseOnExec(int fd) {
  const int flags = fcntl(fd, F_GETFD);
  if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

absl::Status SetNonBlocking(int fd, bool on) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return Internal("fcntl(F_GETFL) failed: " + ErrnoMessage(errno));
  const int want = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, want) < 0) {
    return Internal("fcntl(F_SETFL) failed: " + ErrnoMessage(errno));
  }
  return absl::OkStatus();
}

absl::StatusOr<ScopedFd> ListenTcp(absl::string_view host, int port, int backlog) {
  const absl::string_view bind_host = host == "0.0.0.0" ? absl::string_view() : host;
  auto info = Resolve(bind_host, port, /*passive=*/true);
  if (!info.ok()) return info.status();
  std::string last_error = "no addresses";
  // Prefer IPv4 so "0.0.0.0"-style binds match what clients resolve first.
  for (int pass = 0; pass < 2; ++pass) {
    for (addrinfo* ai = info->get(); ai != nullptr; ai = ai->ai_next) {
      if ((pass == 0) != (ai->ai_family == AF_INET)) continue;
      ScopedFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
      if (!fd.valid()) {
        last_error = ErrnoMessage(errno);
        continue;
      }
      const int one = 1;
      setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 ||
          ::listen(fd.get(), backlog) != 0) {
        last_error = ErrnoMessage(errno);
        continue;
      }
      return fd;
    }
  }
  return Unavailable(
      absl::StrCat("cannot listen on ", host.empty() ? "*" : std::string(host), ":", port, ": ",
                   last_error),
      "a free port on a local interface",
      "another job may be using this port: pick another MASTER_PORT (or 0 for a free one)");
}

absl::StatusOr<int> LocalPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return Internal("getsockname failed: " + ErrnoMessage(errno));
  }
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

absl::StatusOr<ScopedFd> ConnectTcp(absl::string_view host, int port, const Deadline& deadline) {
  auto info = Resolve(host, port, /*passive=*/false);
  if (!info.ok()) return info.status();
  std::string last_error = "no addresses";
  for (addrinfo* ai = info->get(); ai != nullptr; ai = ai->ai_next) {
    ScopedFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last_error = ErrnoMessage(errno);
      continue;
    }
    // Non-blocking connect so an unreachable host cannot outlive the deadline.
    if (absl::Status s = SetNonBlocking(fd.get(), true); !s.ok()) return s;
    int rc = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd pfd{fd.get(), POLLOUT, 0};
      do {
        rc = ::poll(&pfd, 1, deadline.PollMillis());
      } while (rc < 0 && errno == EINTR);
      if (rc == 0) {
        last_error = "connect timed out";
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last_error = ErrnoMessage(err);
        continue;
      }
    } else if (rc != 0) {
      last_error = ErrnoMessage(errno);
      continue;
    }
    if (absl::Status s = SetNonBlocking(fd.get(), false); !s.ok()) return s;
    const int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
  }
  return Unavailable(absl::StrCat("cannot connect to ", host, ":", port, ": ", last_error),
                     "a server listening there", "");
}

absl::Status SendAll(int fd, const void* data, size_t size, const Deadline& deadline) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    pollfd pfd{fd, POLLOUT, 0};
    const int rc = ::poll(&pfd, 1, deadline.PollMillis());
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) return absl::DeadlineExceededError("timed out sending to a peer");
    // MSG_NOSIGNAL: a dead peer is an error here, never a SIGPIPE.
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError("send failed: " + ErrnoMessage(errno));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status RecvAll(int fd, void* data, size_t size, const Deadline& deadline) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    pollfd pfd{fd, POLLIN, 0};
    const int rc = ::poll(&pfd, 1, deadline.PollMillis());
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) return absl::DeadlineExceededError("timed out waiting for a reply");
    const ssize_t n = ::recv(fd, p, size, 0);
    if (n == 0) return absl::UnavailableError("the peer closed the connection");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError("recv failed: " + ErrnoMessage(errno));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace weft::comm
