#include "comm/store/tcp_store.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/store/tcp_store_wire.h"
#include "core/base/errors.h"

namespace weft::comm {
namespace {

using wire::Command;
using wire::ReplyCode;

// Extra time a client gives the server beyond a request's own timeout
// before it declares the server unresponsive.
constexpr absl::Duration kReplyGrace = absl::Seconds(10);

int64_t ToWireMillis(absl::Duration d) {
  if (d >= absl::Hours(24 * 365 * 100)) return int64_t{1} << 50;
  return std::max<int64_t>(0, absl::ToInt64Milliseconds(d));
}

wire::Writer Request(Command cmd) {
  wire::Writer w;
  w.U8(static_cast<uint8_t>(cmd));
  return w;
}

void PutKeys(wire::Writer& w, absl::Span<const std::string> keys) {
  w.I64(static_cast<int64_t>(keys.size()));
  for (const std::string& k : keys) w.Str(k);
}

}  // namespace

TcpStore::TcpStore(TcpStoreOptions options, std::unique_ptr<TcpStoreServer> server)
    : options_(std::move(options)), server_(std::move(server)) {}

TcpStore::~TcpStore() {
  idle_.clear();
  if (server_ != nullptr) server_->Stop();
}

std::string TcpStore::Describe() const {
  return absl::StrCat("TCPStore at ", options_.host, ":", options_.port,
                      options_.rank >= 0 ? absl::StrCat(" (rank ", options_.rank, ")") : "");
}

absl::StatusOr<std::shared_ptr<TcpStore>> TcpStore::Create(const TcpStoreOptions& options) {
  TcpStoreOptions opts = options;
  std::unique_ptr<TcpStoreServer> server;
  if (opts.is_server) {
    TcpStoreServerOptions server_options;
    server_options.host = !opts.listen_host.empty() ? opts.listen_host
                          : IsLoopbackHost(opts.host) ? opts.host
                                                      : "";
    server_options.port = opts.port;
    server_options.world_size = opts.world_size;
    server_options.token = opts.token;
    auto started = TcpStoreServer::Start(server_options);
    if (!started.ok()) {
      return Annotate(started.status(), absl::StrCat("rank ", opts.rank, " hosting the TCPStore"));
    }
    server = std::move(*started);
    opts.port = server->port();
  } else if (opts.port <= 0 || opts.port > 65535) {
    return InvalidArgument(absl::StrCat("TCPStore client port ", opts.port),
                           "the server's port in 1..65535",
                           "set MASTER_PORT (or --master_port) to the port rank 0 listens on");
  }
  std::shared_ptr<TcpStore> store(new TcpStore(opts, std::move(server)));
  auto fd = store->Connect(Deadline::After(opts.connect_timeout));
  if (!fd.ok()) return fd.status();
  store->idle_.push_back(std::move(*fd));
  return store;
}

absl::StatusOr<ScopedFd> TcpStore::Connect(const Deadline& deadline) const {
  absl::Duration backoff = absl::Milliseconds(10);
  absl::Status last;
  while (true) {
    auto fd = ConnectTcp(options_.host, options_.port, deadline);
    if (fd.ok()) {
      wire::Writer hello = Request(Command::kHello);
      hello.I64(wire::kMagic);
      hello.I64(wire::kVersion);
      hello.I64(options_.world_size);
      hello.I64(options_.rank);
      hello.Str(options_.token);
      const std::string frame = hello.Frame();
      const Deadline reply_by = Deadline::After(std::max(deadline.Remaining(), kReplyGrace));
      last = SendAll(fd->get(), frame.data(), frame.size(), reply_by);
      char header[4];
      if (last.ok()) last = RecvAll(fd->get(), header, 4, reply_by);
      std::string payload;
      if (last.ok()) {
        payload.resize(wire::DecodeLength(header));
        last = RecvAll(fd->get(), payload.data(), payload.size(), reply_by);
      }
      if (last.ok()) {
        wire::Reader r(payload);
        uint8_t code = 0;
        std::string message;
        if (r.U8(&code) && code == static_cast<uint8_t>(ReplyCode::kOk)) return std::move(*fd);
        r.Str(&message);
        // A rejected hello is final: retrying cannot fix a world-size mismatch.
        return FailedPrecondition(
            absl::StrCat(Describe(), " rejected this client: ", message),
            absl::StrCat("every rank and the store host to agree on the world size (this client: ",
                         options_.world_size, ")"),
            "check WORLD_SIZE / --nproc_per_node x --nnodes on every node, and that no other "
            "job uses this MASTER_PORT");
      }
    } else {
      last = fd.status();
    }
    if (deadline.Expired()) break;
    absl::SleepFor(std::min(backoff, deadline.Remaining()));
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
  return DeadlineExceeded(
      absl::StrCat("could not connect to the ", Describe(), " within ",
                   absl::FormatDuration(options_.connect_timeout), " (last error: ",
                   last.message(), ")"),
      "rank 0 (or the launcher) to host the store at that address",
      "check MASTER_ADDR/MASTER_PORT, that rank 0 started and is alive, and that no firewall "
      "blocks the port");
}

absl::StatusOr<std::string> TcpStore::Call(absl::string_view what, const std::string& frame,
                                           absl::Duration wait) {
  ScopedFd fd;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      fd = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!fd.valid()) {
    auto fresh = Connect(Deadline::After(options_.connect_timeout));
    if (!fresh.ok()) return fresh.status();
    fd = std::move(*fresh);
  }
  const Deadline deadline = Deadline::After(wait + kReplyGrace);
  absl::Status s = SendAll(fd.get(), frame.data(), frame.size(), deadline);
  char header[4];
  if (s.ok()) s = RecvAll(fd.get(), header, 4, deadline);
  std::string payload;
  if (s.ok()) {
    const uint32_t len = wire::DecodeLength(header);
    if (len == 0 || len > wire::kMaxFrameBytes) {
      s = absl::InternalError(absl::StrCat("corrupt reply of ", len, " bytes"));
    } else {
      payload.resize(len);
      s = RecvAll(fd.get(), payload.data(), payload.size(), deadline);
    }
  }
  if (!s.ok()) {
    // The stream may be out of step now: drop this connection (fd closes).
    return Unavailable(
        absl::StrCat("lost the connection to the ", Describe(), " during ", what, ": ",
                     s.message()),
        "the store host (rank 0 or the launcher) to stay up for the whole job",
        "if rank 0 or the launcher exited or crashed, the job cannot continue; check its log");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(fd));
  }
  if (static_cast<uint8_t>(payload[0]) == static_cast<uint8_t>(ReplyCode::kError)) {
    wire::Reader r(absl::string_view(payload).substr(1));
    std::string message;
    r.Str(&message);
    return InvalidArgument(absl::StrCat(Describe(), " refused ", what, ": ", message), "");
  }
  return payload;
}

absl::Status TcpStore::Set(absl::string_view key, absl::string_view value) {
  wire::Writer w = Request(Command::kSet);
  w.Str(key);
  w.Str(value);
  return Call(absl::StrCat("set('", key, "')"), w.Frame(), options_.timeout).status();
}

absl::StatusOr<std::string> TcpStore::Get(absl::string_view key, absl::Duration timeout) {
  wire::Writer w = Request(Command::kGet);
  w.Str(key);
  w.I64(ToWireMillis(timeout));
  auto reply = Call(absl::StrCat("get('", key, "')"), w.Frame(), timeout);
  if (!reply.ok()) return reply.status();
  wire::Reader r(*reply);
  uint8_t code = 0;
  r.U8(&code);
  if (code == static_cast<uint8_t>(ReplyCode::kTimeout)) {
    const std::string k(key);
    return StoreTimeoutError(Describe(), {&k, 1}, {&k, 1}, timeout);
  }
  std::string value;
  if (!r.Str(&value)) return Internal(Describe() + ": malformed get reply");
  return value;
}

absl::StatusOr<int64_t> TcpStore::Add(absl::string_view key, int64_t delta) {
  wire::Writer w = Request(Command::kAdd);
  w.Str(key);
  w.I64(delta);
  auto reply = Call(absl::StrCat("add('", key, "')"), w.Frame(), options_.timeout);
  if (!reply.ok()) return reply.status();
  wire::Reader r(absl::string_view(*reply).substr(1));
  int64_t value = 0;
  if (!r.I64(&value)) return Internal(Describe() + ": malformed add reply");
  return value;
}

absl::StatusOr<std::string> TcpStore::CompareSet(absl::string_view key,
                                                 absl::string_view expected,
                                                 absl::string_view desired) {
  wire::Writer w = Request(Command::kCompareSet);
  w.Str(key);
  w.Str(expected);
  w.Str(desired);
  auto reply = Call(absl::StrCat("compare_set('", key, "')"), w.Frame(), options_.timeout);
  if (!reply.ok()) return reply.status();
  wire::Reader r(absl::string_view(*reply).substr(1));
  std::string value;
  if (!r.Str(&value)) return Internal(Describe() + ": malformed compare_set reply");
  return value;
}

absl::Status TcpStore::Wait(absl::Span<const std::string> keys, absl::Duration timeout) {
  wire::Writer w = Request(Command::kWait);
  PutKeys(w, keys);
  w.I64(ToWireMillis(timeout));
  auto reply = Call(absl::StrCat("wait([", absl::StrJoin(keys, ", "), "])"), w.Frame(), timeout);
  if (!reply.ok()) return reply.status();
  wire::Reader r(*reply);
  uint8_t code = 0;
  r.U8(&code);
  if (code != static_cast<uint8_t>(ReplyCode::kTimeout)) return absl::OkStatus();
  int64_t n = 0;
  std::vector<std::string> missing;
  if (r.I64(&n)) {
    std::string k;
    for (int64_t i = 0; i < n && r.Str(&k); ++i) missing.push_back(k);
  }
  return StoreTimeoutError(Describe(), keys, missing, timeout);
}

absl::StatusOr<bool> TcpStore::Check(absl::Span<const std::string> keys) {
  wire::Writer w = Request(Command::kCheck);
  PutKeys(w, keys);
  auto reply = Call("check", w.Frame(), options_.timeout);
  if (!reply.ok()) return reply.status();
  wire::Reader r(absl::string_view(*reply).substr(1));
  int64_t v = 0;
  if (!r.I64(&v)) return Internal(Describe() + ": malformed check reply");
  return v != 0;
}

absl::StatusOr<bool> TcpStore::DeleteKey(absl::string_view key) {
  wire::Writer w = Request(Command::kDelete);
  w.Str(key);
  auto reply = Call(absl::StrCat("delete('", key, "')"), w.Frame(), options_.timeout);
  if (!reply.ok()) return reply.status();
  wire::Reader r(absl::string_view(*reply).substr(1));
  int64_t v = 0;
  if (!r.I64(&v)) return Internal(Describe() + ": malformed delete reply");
  return v != 0;
}

absl::StatusOr<int64_t> TcpStore::NumKeys() {
  auto reply = Call("num_keys", Request(Command::kNumKeys).Frame(), options_.timeout);
  if (!reply.ok()) return reply.status();
  wire::Reader r(absl::string_view(*reply).substr(1));
  int64_t v = 0;
  if (!r.I64(&v)) return Internal(Describe() + ": malformed num_keys reply");
  return v;
}

}  // namespace weft::comm
