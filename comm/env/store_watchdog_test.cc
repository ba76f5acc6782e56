// StoreWatchdog: quiet while the store answers, and says so within a few
// intervals once it is gone (the launcher that hosted it died).
#include "comm/env/store_watchdog.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "comm/store/tcp_store_server.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

TEST(StoreWatchdogTest, NamesTheStoreOnceItStopsAnswering) {
  auto server = TcpStoreServer::Start({.host = "127.0.0.1", .port = 0, .token = "t"});
  ASSERT_TRUE(server.ok()) << server.status();
  std::atomic<bool> lost{false};
  std::mutex mu;
  std::string what;
  auto dog = StoreWatchdog::Start(
      {.store = {.port = (*server)->port(), .rank = 1, .connect_timeout = absl::Seconds(1),
                 .token = "t"},
       .interval = absl::Milliseconds(100),
       .on_lost = [&](const std::string& w) {
         std::lock_guard<std::mutex> lock(mu);
         what = w;
         lost = true;
       }});
  ASSERT_TRUE(dog.ok()) << dog.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_FALSE(lost) << "the store is up";
  const int port = (*server)->port();
  (*server)->Stop();
  const auto start = std::chrono::steady_clock::now();
  while (!lost && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(lost) << "no word 10 s after the store went away";
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(absl::StrContains(what, "127.0.0.1:" + std::to_string(port))) << what;
  EXPECT_TRUE(absl::StrContains(what, "stopped answering")) << what;
}

}  // namespace
}  // namespace weft::comm
