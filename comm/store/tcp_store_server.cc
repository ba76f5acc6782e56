#include "comm/store/tcp_store_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <list>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/store/kv_table.h"
#include "comm/store/tcp_store_wire.h"
#include "comm/util/deadline.h"
#include "core/base/errors.h"

namespace weft::comm {
namespace {

using wire::Command;
using wire::ReplyCode;

struct Client {
  ScopedFd fd;
  std::string in;   // bytes received, not yet parsed
  std::string out;  // bytes to send
  bool said_hello = false;
  bool close_after_flush = false;
  bool dead = false;
};

struct Waiter {
  uint64_t client = 0;
  bool is_get = false;  // Get replies with the value, Wait with nothing
  std::vector<std::string> keys;
  Deadline deadline = Deadline::After(absl::ZeroDuration());
};

// Everything the loop thread owns. Not thread-safe by design: one thread.
class ServerState {
 public:
  ServerState(int world_size, std::string token)
      : world_size_(world_size), token_(std::move(token)) {}

  void Accept(int listen_fd);
  void OnReadable(uint64_t id);
  void OnWritable(uint64_t id);
  void ExpireWaiters();
  void ReapDead();
  int PollTimeoutMillis() const;
  std::map<uint64_t, Client>& clients() { return clients_; }

 private:
  void HandleFrame(uint64_t id, absl::string_view payload);
  void HandleHello(uint64_t id, wire::Reader& r);
  void Reply(uint64_t id, const wire::Writer& w);
  void ReplyError(uint64_t id, absl::string_view message);
  void ReplyMissing(uint64_t id, const std::vector<std::string>& missing);
  void ReplyReady(const Waiter& waiter);
  void WakeWaiters();
  void Flush(Client& c);

  const int world_size_;
  const std::string token_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Client> clients_;
  std::list<Waiter> waiters_;
  KvTable table_;
};

void ServerState::Accept(int listen_fd) {
  while (true) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: no more pending connections
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Client c;
    c.fd.Reset(fd);
    clients_.emplace(next_id_++, std::move(c));
  }
}

void ServerState::OnReadable(uint64_t id) {
  Client& c = clients_.at(id);
  char buf[64 * 1024];
  while (true) {
    const ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), 0);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) c.dead = true;
    break;
  }
  // Parse every complete frame; HandleFrame may append to c.out.
  size_t pos = 0;
  while (!c.dead && c.in.size() - pos >= 4) {
    const uint32_t len = wire::DecodeLength(c.in.data() + pos);
    if (len > (c.said_hello ? wire::kMaxFrameBytes : wire::kMaxHelloBytes)) {
      c.dead = true;
      break;
    }
    if (c.in.size() - pos - 4 < len) break;
    HandleFrame(id, absl::string_view(c.in).substr(pos + 4, len));
    pos += 4 + len;
  }
  c.in.erase(0, pos);
  // Nothing past a hello's size is buffered for a client that has not said it.
  if (!c.said_hello && c.in.size() > 4 + wire::kMaxHelloBytes) c.dead = true;
  Flush(c);
}

void ServerState::OnWritable(uint64_t id) { Flush(clients_.at(id)); }

void ServerState::Flush(Client& c) {
  while (!c.dead && !c.out.empty()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    c.dead = true;
  }
  if (c.out.empty() && c.close_after_flush) c.dead = true;
}

void ServerState::ReapDead() {
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (!it->second.dead) {
      ++it;
      continue;
    }
    const uint64_t id = it->first;
    waiters_.remove_if([id](const Waiter& w) { return w.client == id; });
    it = clients_.erase(it);
  }
}

int ServerState::PollTimeoutMillis() const {
  if (waiters_.empty()) return -1;
  int64_t best = INT64_MAX;
  for (const Waiter& w : waiters_) best = std::min<int64_t>(best, w.deadline.RemainingMillis());
  return static_cast<int>(std::min<int64_t>(best, 1000 * 1000));
}

void ServerState::Reply(uint64_t id, const wire::Writer& w) { clients_.at(id).out += w.Frame(); }

void ServerState::ReplyError(uint64_t id, absl::string_view message) {
  wire::Writer w;
  w.U8(static_cast<uint8_t>(ReplyCode::kError));
  w.Str(message);
  Reply(id, w);
}

void ServerState::ReplyMissing(uint64_t id, const std::vector<std::string>& missing) {
  wire::Writer w;
  w.U8(static_cast<uint8_t>(ReplyCode::kTimeout));
  w.I64(static_cast<int64_t>(missing.size()));
  for (const std::string& k : missing) w.Str(k);
  Reply(id, w);
}

void ServerState::ReplyReady(const Waiter& waiter) {
  wire::Writer w;
  w.U8(static_cast<uint8_t>(ReplyCode::kOk));
  if (waiter.is_get) w.Str(*table_.Find(waiter.keys[0]));
  Reply(waiter.client, w);
}

void ServerState::WakeWaiters() {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (table_.Missing(it->keys).empty()) {
      ReplyReady(*it);
      Flush(clients_.at(it->client));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

void ServerState::ExpireWaiters() {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->deadline.Expired()) {
      ReplyMissing(it->client, table_.Missing(it->keys));
      Flush(clients_.at(it->client));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

void ServerState::HandleHello(uint64_t id, wire::Reader& r) {
  int64_t magic = 0, version = 0, world_size = 0, rank = 0;
  if (!r.I64(&magic) || !r.I64(&version) || !r.I64(&world_size) || !r.I64(&rank) ||
      magic != wire::kMagic) {
    ReplyError(id, "not a weft TCPStore client (bad hello)");
    clients_.at(id).close_after_flush = true;
    return;
  }
  std::string token;
  if (version == wire::kVersion && !r.Str(&token)) {
    ReplyError(id, "not a weft TCPStore client (a hello without its token field)");
    clients_.at(id).close_after_flush = true;
    return;
  }
  // Compared in constant time: how long a reply takes says nothing of the secret.
  uint8_t diff = token.size() == token_.size() ? 0 : 1;
  for (size_t i = 0; i < token.size() && i < token_.size(); ++i) diff |= token[i] ^ token_[i];
  if (version == wire::kVersion && !token_.empty() && diff != 0) {
    ReplyError(id, absl::StrCat("rank ", rank, " gave ", token.empty() ? "no" : "a wrong",
                                " store token: this job's store requires its own (", wire::kTokenEnv,
                                ", which weft's launcher sets for every worker; set the same value "
                                "on every node)"));
    clients_.at(id).close_after_flush = true;
    return;
  }
  if (version != wire::kVersion) {
    ReplyError(id, absl::StrCat("protocol version ", version, " is not the server's ",
                                wire::kVersion, "; rebuild all ranks from the same source"));
    clients_.at(id).close_after_flush = true;
    return;
  }
  if (world_size_ > 0 && world_size > 0 && world_size != world_size_) {
    ReplyError(id, absl::StrCat("this TCPStore serves a job of world size ", world_size_,
                                ", but rank ", rank, " connected expecting world size ",
                                world_size));
    clients_.at(id).close_after_flush = true;
    return;
  }
  clients_.at(id).said_hello = true;
  wire::Writer w;
  w.U8(static_cast<uint8_t>(ReplyCode::kOk));
  Reply(id, w);
}

void ServerState::HandleFrame(uint64_t id, absl::string_view payload) {
  wire::Reader r(payload);
  uint8_t cmd_byte = 0;
  if (!r.U8(&cmd_byte)) {
    clients_.at(id).dead = true;
    return;
  }
  const auto cmd = static_cast<Command>(cmd_byte);
  if (cmd == Command::kHello) {
    HandleHello(id, r);
    return;
  }
  if (!clients_.at(id).said_hello) {
    ReplyError(id, "request before hello");
    clients_.at(id).close_after_flush = true;
    return;
  }
  wire::Writer ok;
  ok.U8(static_cast<uint8_t>(ReplyCode::kOk));
  std::string key, a, b;
  int64_t n = 0;
  bool parsed = true;
  switch (cmd) {
    case Command::kSet:
      parsed = r.Str(&key) && r.Str(&a);
      if (!parsed) break;
      table_.Set(key, a);
      Reply(id, ok);
      WakeWaiters();
      return;
    case Command::kGet:
    case Command::kWait: {
      Waiter w;
      w.client = id;
      w.is_get = cmd == Command::kGet;
      if (w.is_get) {
        parsed = r.Str(&key);
        w.keys.push_back(key);
      } else {
        parsed = r.I64(&n) && n >= 0;
        for (int64_t i = 0; parsed && i < n; ++i) {
          parsed = r.Str(&key);
          w.keys.push_back(key);
        }
      }
      parsed = parsed && r.I64(&n);
      if (!parsed) break;
      w.deadline = Deadline::After(absl::Milliseconds(n));
      if (table_.Missing(w.keys).empty()) {
        ReplyReady(w);
      } else {
        waiters_.push_back(std::move(w));
      }
      return;
    }
    case Command::kAdd: {
      parsed = r.Str(&key) && r.I64(&n);
      if (!parsed) break;
      absl::StatusOr<int64_t> v = table_.Add(key, n);
      if (!v.ok()) {
        ReplyError(id, v.status().message());
        return;
      }
      ok.I64(*v);
      Reply(id, ok);
      WakeWaiters();
      return;
    }
    case Command::kCompareSet:
      parsed = r.Str(&key) && r.Str(&a) && r.Str(&b);
      if (!parsed) break;
      ok.Str(table_.CompareSet(key, a, b));
      Reply(id, ok);
      WakeWaiters();
      return;
    case Command::kCheck: {
      std::vector<std::string> keys;
      parsed = r.I64(&n) && n >= 0;
      for (int64_t i = 0; parsed && i < n; ++i) {
        parsed = r.Str(&key);
        keys.push_back(key);
      }
      if (!parsed) break;
      ok.I64(table_.Missing(keys).empty() ? 1 : 0);
      Reply(id, ok);
      return;
    }
    case Command::kDelete:
      parsed = r.Str(&key);
      if (!parsed) break;
      ok.I64(table_.Delete(key) ? 1 : 0);
      Reply(id, ok);
      return;
    case Command::kNumKeys:
      ok.I64(table_.size());
      Reply(id, ok);
      return;
    default:
      parsed = false;
  }
  ReplyError(id, absl::StrCat("malformed request (command ", cmd_byte, ")"));
  clients_.at(id).close_after_flush = true;
}

}  // namespace

TcpStoreServer::TcpStoreServer(TcpStoreServerOptions options, ScopedFd listen_fd, int port)
    : options_(std::move(options)), listen_fd_(std::move(listen_fd)), port_(port) {}

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Listen(
    const TcpStoreServerOptions& options) {
  auto fd = ListenTcp(options.host, options.port);
  if (!fd.ok()) return fd.status();
  auto port = LocalPort(fd->get());
  if (!port.ok()) return port.status();
  if (absl::Status s = SetNonBlocking(fd->get(), true); !s.ok()) return s;
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(options, std::move(*fd), *port));
}

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    const TcpStoreServerOptions& options) {
  auto server = Listen(options);
  if (!server.ok()) return server.status();
  if (absl::Status s = (*server)->Serve(); !s.ok()) return s;
  return server;
}

absl::Status TcpStoreServer::Serve() {
  if (thread_.joinable()) {
    return FailedPrecondition("TcpStoreServer::Serve called twice", "one call per server");
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Internal("pipe2 failed: " + ErrnoMessage(errno));
  }
  wake_read_.Reset(fds[0]);
  wake_write_.Reset(fds[1]);
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void TcpStoreServer::Stop() {
  if (thread_.joinable()) {
    stop_.store(true);
    const char byte = 1;
    (void)!::write(wake_write_.get(), &byte, 1);
    thread_.join();
  }
  // Refuse new connections too, so clients fail fast instead of waiting for
  // a hello reply that never comes.
  listen_fd_.Reset();
}

TcpStoreServer::~TcpStoreServer() { Stop(); }

void TcpStoreServer::Loop() {
  ServerState state(options_.world_size, options_.token);
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (!stop_.load()) {
    fds.clear();
    ids.clear();
    fds.push_back({wake_read_.get(), POLLIN, 0});
    fds.push_back({listen_fd_.get(), POLLIN, 0});
    for (auto& [id, c] : state.clients()) {
      fds.push_back({c.fd.get(), static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      ids.push_back(id);
    }
    const int rc = ::poll(fds.data(), fds.size(), state.PollTimeoutMillis());
    if (rc < 0 && errno != EINTR) {
      std::fprintf(stderr, "weft TcpStoreServer: poll failed: %s\n", ErrnoMessage(errno).c_str());
      break;
    }
    if (stop_.load()) break;
    if (rc > 0) {
      if (fds[1].revents & POLLIN) state.Accept(listen_fd_.get());
      for (size_t i = 0; i < ids.size(); ++i) {
        const short ev = fds[i + 2].revents;
        if (ev & (POLLIN | POLLHUP | POLLERR)) state.OnReadable(ids[i]);
        if (ev & POLLOUT) state.OnWritable(ids[i]);
      }
    }
    state.ExpireWaiters();
    state.ReapDead();
  }
}

}  // namespace weft::comm
