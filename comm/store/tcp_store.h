// TcpStore: a Store served over TCP, for ranks in different processes or on
// different hosts. One rank (normally 0) or the launcher hosts the server;
// every rank, the host included, talks to it as a client.
//
//   auto store = TcpStore::Create({.host = env.master_addr, .port = env.master_port,
//                                  .is_server = env.rank == 0,
//                                  .world_size = env.world_size, .rank = env.rank});
//
// Connecting retries until connect_timeout (the server may start later than
// the clients). The hello handshake rejects a world-size mismatch with
// FailedPrecondition. Get and Wait are answered by the server within their
// timeout, so a lost rank shows up as DeadlineExceeded naming the keys; a
// dead server shows up as Unavailable.
//
// Thread-safe: concurrent calls use separate connections from a small pool,
// so one thread blocked in Get never delays another thread's Set. A
// connection that saw an I/O error is dropped and replaced on demand.
#ifndef WEFT_COMM_STORE_TCP_STORE_H_
#define WEFT_COMM_STORE_TCP_STORE_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/store/store.h"
#include "comm/store/tcp_store_server.h"
#include "comm/util/socket.h"

namespace weft::comm {

struct TcpStoreOptions {
  std::string host = "127.0.0.1";
  // With is_server, 0 picks a free port (see port()); clients need the real one.
  int port = 0;
  // Host the server in this process (then connect to it like any client).
  bool is_server = false;
  // Server only: the interface to listen on. Empty: loopback when `host` is a
  // loopback address, every interface otherwise.
  std::string listen_host;
  // The job's world size, checked against the server's (0: no check).
  int world_size = 0;
  // This client's rank, reported in errors (-1: unknown).
  int rank = -1;
  // Default for Get/Wait and the bound on every other request.
  absl::Duration timeout = kDefaultStoreTimeout;
  // How long to keep retrying the first connection.
  absl::Duration connect_timeout = absl::Seconds(60);
  // The job's secret (wire::kTokenEnv): sent in the hello, and required of
  // every client by a server hosted here. Empty: none.
  std::string token;
};

class TcpStore : public Store {
 public:
  static absl::StatusOr<std::shared_ptr<TcpStore>> Create(const TcpStoreOptions& options);
  ~TcpStore() override;

  using Store::Get;
  using Store::Wait;
  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override;
  absl::StatusOr<std::string> CompareSet(absl::string_view key, absl::string_view expected,
                                         absl::string_view desired) override;
  absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) override;
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override;
  absl::StatusOr<bool> DeleteKey(absl::string_view key) override;
  absl::StatusOr<int64_t> NumKeys() override;
  absl::Duration timeout() const override { return options_.timeout; }

  const std::string& host() const { return options_.host; }
  int port() const { return options_.port; }
  // The in-process server when this store hosts it, else nullptr.
  TcpStoreServer* server() const { return server_.get(); }

 private:
  TcpStore(TcpStoreOptions options, std::unique_ptr<TcpStoreServer> server);
  std::string Describe() const;
  // A new connection (retrying until `deadline`) that has said hello.
  absl::StatusOr<ScopedFd> Connect(const Deadline& deadline) const;
  // Sends one request and returns the reply payload (starting with its
  // ReplyCode byte). `wait` is how long the server may legitimately take.
  absl::StatusOr<std::string> Call(absl::string_view what, const std::string& frame,
                                   absl::Duration wait);

  TcpStoreOptions options_;
  std::unique_ptr<TcpStoreServer> server_;
  std::mutex mu_;
  std::vector<ScopedFd> idle_;  // connections not in use by a call
};

}  // namespace weft::comm

#endif  // WEFT_COMM_STORE_TCP_STORE_H_
