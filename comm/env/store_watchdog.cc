#include "comm/env/store_watchdog.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace weft::comm {

absl::StatusOr<std::unique_ptr<StoreWatchdog>> StoreWatchdog::Start(StoreWatchdogOptions o) {
  o.store.is_server = false;
  // The caller's short connect timeout makes each check of a dead store fail
  // within seconds (a reconnect is refused at once).
  auto store = TcpStore::Create(o.store);
  if (!store.ok()) return store.status();
  if (!o.on_lost) {
    const int rank = o.store.rank;
    o.on_lost = [rank](const std::string& what) {
      const std::string line =
          absl::StrCat("[rank ", rank, "] ", what, "; exiting (code ", kStoreLostExitCode, ")\n");
      (void)!::write(2, line.data(), line.size());
      std::_Exit(kStoreLostExitCode);
    };
  }
  return std::unique_ptr<StoreWatchdog>(new StoreWatchdog(std::move(o), *std::move(store)));
}

StoreWatchdog::StoreWatchdog(StoreWatchdogOptions options, std::shared_ptr<TcpStore> store)
    : options_(std::move(options)), store_(std::move(store)), thread_([this] { Run(); }) {}

StoreWatchdog::~StoreWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StoreWatchdog::Run() {
  int missed = 0;
  absl::Status last;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, absl::ToChronoMilliseconds(options_.interval),
                       [this] { return stop_; })) {
        return;
      }
    }
    const absl::StatusOr<bool> ok = store_->Check({"weft/watchdog"});
    missed = ok.ok() ? 0 : missed + 1;
    if (!ok.ok()) last = ok.status();
    if (missed >= options_.misses) {
      options_.on_lost(absl::StrCat(
          "the job's store at ", options_.store.host, ":", options_.store.port, " stopped answering (",
          missed, " checks ", absl::FormatDuration(options_.interval),
          " apart failed: ", last.message(), "): the launcher hosting it is gone"));
      return;
    }
  }
}

}  // namespace weft::comm
