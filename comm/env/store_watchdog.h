// StoreWatchdog: a rank's check that its job's store still answers.
//
// gloo's collectives run peer to peer, so ranks whose launcher died with
// the store it hosted would train on without it, unable ever to checkpoint
// or stop together: a launcher SIGKILLed while its workers sit under a
// wrapper (`launch -- bash -c "train ..."`), where the kernel's
// parent-death signal reaches only the wrapper, left them running at full
// CPU. Every `interval` the watchdog checks a key over a connection of its
// own (short connect timeout); after `misses` failed checks in a row it
// calls `on_lost` with what happened (by default: print it and exit).
#ifndef WEFT_COMM_ENV_STORE_WATCHDOG_H_
#define WEFT_COMM_ENV_STORE_WATCHDOG_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/store/tcp_store.h"

namespace weft::comm {

// The exit code of a rank that lost its store (EX_UNAVAILABLE).
inline constexpr int kStoreLostExitCode = 69;

struct StoreWatchdogOptions {
  TcpStoreOptions store;  // where the job's store is (a client's options)
  absl::Duration interval = absl::Seconds(5);
  int misses = 2;
  // Called once, from the watchdog's thread, when the store is lost.
  std::function<void(const std::string& what)> on_lost;
};

class StoreWatchdog {
 public:
  // Connects (within the store's connect timeout) and starts checking.
  static absl::StatusOr<std::unique_ptr<StoreWatchdog>> Start(StoreWatchdogOptions options);
  ~StoreWatchdog();  // stops and joins

 private:
  StoreWatchdog(StoreWatchdogOptions options, std::shared_ptr<TcpStore> store);
  void Run();

  const StoreWatchdogOptions options_;
  std::shared_ptr<TcpStore> store_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_ENV_STORE_WATCHDOG_H_
