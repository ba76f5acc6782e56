// TcpStoreServer: the server side of TcpStore, one thread running a poll(2)
// loop over all clients. Hosted by rank 0 (TcpStore with is_server) or by
// the launcher, so it outlives no job and needs no separate daemon.
//
// Blocking requests (Get, Wait) park as waiters and are answered when their
// keys appear or their own timeout expires, so one slow rank never blocks
// the others. A client must say hello first; the server rejects a client
// whose world size differs from its own, which catches two jobs sharing a
// port or a rank started with the wrong WORLD_SIZE.
//
// Two-phase start for fork-based tests: Listen() binds the port without
// starting a thread, children are forked (the parent is still
// single-threaded), then Serve() starts the loop.
#ifndef WEFT_COMM_STORE_TCP_STORE_SERVER_H_
#define WEFT_COMM_STORE_TCP_STORE_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/util/socket.h"

namespace weft::comm {

struct TcpStoreServerOptions {
  // Interface to listen on: "" or "0.0.0.0" for all interfaces.
  std::string host;
  // 0 lets the kernel pick a free port (read it back with port()).
  int port = 0;
  // World size clients must report in their hello; 0 accepts any.
  int world_size = 0;
  // The secret every hello must carry; empty accepts any client that speaks
  // the protocol (the store is then open to whoever reaches its port).
  std::string token;
};

class TcpStoreServer {
 public:
  // Binds and listens; does not serve yet.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Listen(
      const TcpStoreServerOptions& options);
  // Listen() followed by Serve().
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(
      const TcpStoreServerOptions& options);

  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // Starts the serving thread. Calling it twice is an error.
  absl::Status Serve();
  // Stops serving and closes every connection; clients then see errors.
  void Stop();

  int port() const { return port_; }
  int world_size() const { return options_.world_size; }
  // The listening socket, so a forked child can close its copy.
  int listen_fd() const { return listen_fd_.get(); }

 private:
  TcpStoreServer(TcpStoreServerOptions options, ScopedFd listen_fd, int port);
  void Loop();

  const TcpStoreServerOptions options_;
  ScopedFd listen_fd_;
  const int port_;
  ScopedFd wake_read_;
  ScopedFd wake_write_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_STORE_TCP_STORE_SERVER_H_
