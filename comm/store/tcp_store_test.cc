#include "comm/store/tcp_store.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm/util/socket.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int FreePort() {
  auto fd = ListenTcp("127.0.0.1", 0);
  EXPECT_TRUE(fd.ok());
  return *LocalPort(fd->get());
}

TEST(TcpStoreTest, ClientsInOtherThreadsRendezvous) {
  auto server = TcpStore::Create(
      {.port = 0, .is_server = true, .world_size = 4, .rank = 0, .timeout = absl::Seconds(5)});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  ASSERT_TRUE((*server)->Set("rank_0", "r0").ok());
  std::vector<std::thread> threads;
  for (int r = 1; r < 4; ++r) {
    threads.emplace_back([r, port] {
      auto client = TcpStore::Create(
          {.port = port, .world_size = 4, .rank = r, .timeout = absl::Seconds(5)});
      ASSERT_TRUE(client.ok()) << client.status();
      ASSERT_TRUE((*client)->Set(absl::StrCat("rank_", r), absl::StrCat("r", r)).ok());
      ASSERT_TRUE((*client)->Wait({"rank_0", "rank_1", "rank_2", "rank_3"}).ok());
      EXPECT_EQ(*(*client)->Get("rank_3"), "r3");
      EXPECT_EQ(*(*client)->Add("arrived", 1) >= 1, true);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*(*server)->Get("arrived"), "3");
}

TEST(TcpStoreTest, RejectsWorldSizeMismatch) {
  auto server =
      TcpStore::Create({.port = 0, .is_server = true, .world_size = 2, .rank = 0});
  ASSERT_TRUE(server.ok());
  auto client = TcpStore::Create({.port = (*server)->port(), .world_size = 3, .rank = 1,
                                  .connect_timeout = absl::Seconds(5)});
  ASSERT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition) << client.status();
  EXPECT_TRUE(absl::StrContains(client.status().message(), "world size 2")) << client.status();
  EXPECT_TRUE(absl::StrContains(client.status().message(), "world size 3")) << client.status();
}

// A store with a token serves only clients that carry it: a local program
// that knows the public magic number cannot read or write the job's keys.
TEST(TcpStoreTest, TokenIsRequiredWhenTheServerHasOne) {
  auto server = TcpStore::Create(
      {.port = 0, .is_server = true, .world_size = 2, .rank = 0, .token = "s3cret"});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Set("weft_ckpt/1/done", "1").ok());
  for (const char* wrong : {"", "s3creT", "s3cret-and-more"}) {
    auto stranger = TcpStore::Create({.port = (*server)->port(), .world_size = 2, .rank = 1,
                                      .connect_timeout = absl::Seconds(5), .token = wrong});
    ASSERT_EQ(stranger.status().code(), absl::StatusCode::kFailedPrecondition)
        << "token '" << wrong << "': " << stranger.status();
    EXPECT_TRUE(absl::StrContains(stranger.status().message(), "store token"))
        << stranger.status();
    EXPECT_TRUE(absl::StrContains(stranger.status().message(), "WEFT_STORE_TOKEN"));
  }
  auto member = TcpStore::Create({.port = (*server)->port(), .world_size = 2, .rank = 1,
                                  .connect_timeout = absl::Seconds(5), .token = "s3cret"});
  ASSERT_TRUE(member.ok()) << member.status();
  EXPECT_EQ(*(*member)->Get("weft_ckpt/1/done"), "1");
}

// Before its hello a connection may not make the server buffer a large
// frame: the header of a 1 GiB frame closes it at once.
TEST(TcpStoreTest, LargeFramesBeforeTheHelloCloseTheConnection) {
  auto server = TcpStore::Create({.port = 0, .is_server = true, .rank = 0});
  ASSERT_TRUE(server.ok()) << server.status();
  auto fd = ConnectTcp("127.0.0.1", (*server)->port(), Deadline::After(absl::Seconds(5)));
  ASSERT_TRUE(fd.ok()) << fd.status();
  const uint32_t len = 1u << 30;
  const char header[4] = {static_cast<char>(len & 0xff), static_cast<char>((len >> 8) & 0xff),
                          static_cast<char>((len >> 16) & 0xff), static_cast<char>(len >> 24)};
  ASSERT_TRUE(SendAll(fd->get(), header, 4, Deadline::After(absl::Seconds(5))).ok());
  const std::string filler(1 << 16, 'x');
  // The server hangs up: a send fails or the read sees the end, within seconds.
  const auto start = Clock::now();
  bool closed = false;
  for (int i = 0; i < 64 && !closed; ++i) {
    closed = !SendAll(fd->get(), filler.data(), filler.size(), Deadline::After(absl::Seconds(5))).ok();
  }
  if (!closed) {
    char byte;
    closed = !RecvAll(fd->get(), &byte, 1, Deadline::After(absl::Seconds(5))).ok();
  }
  EXPECT_TRUE(closed);
  EXPECT_LT(SecondsSince(start), 5.0);
  // And it still serves its own clients.
  EXPECT_TRUE((*server)->Set("k", "v").ok());
}

TEST(TcpStoreTest, ConnectGivesUpAtTheDeadline) {
  const int port = FreePort();
  const auto start = Clock::now();
  auto client = TcpStore::Create(
      {.port = port, .world_size = 2, .rank = 1, .connect_timeout = absl::Milliseconds(300)});
  ASSERT_EQ(client.status().code(), absl::StatusCode::kDeadlineExceeded) << client.status();
  EXPECT_TRUE(absl::StrContains(client.status().message(), absl::StrCat("127.0.0.1:", port)))
      << client.status();
  EXPECT_LT(SecondsSince(start), 3.0);
}

TEST(TcpStoreTest, ClientRetriesUntilTheServerStarts) {
  const int port = FreePort();
  std::thread late_server([port] {
    absl::SleepFor(absl::Milliseconds(200));
    auto server = TcpStoreServer::Start({.host = "127.0.0.1", .port = port, .world_size = 2});
    ASSERT_TRUE(server.ok()) << server.status();
    absl::SleepFor(absl::Milliseconds(500));
  });
  auto client = TcpStore::Create(
      {.port = port, .world_size = 2, .rank = 1, .connect_timeout = absl::Seconds(5)});
  EXPECT_TRUE(client.ok()) << client.status();
  if (client.ok()) {
    EXPECT_TRUE((*client)->Set("k", "v").ok());
  }
  late_server.join();
}

TEST(TcpStoreTest, TimedOutGetKeepsTheConnectionUsable) {
  auto store = TcpStore::Create({.port = 0, .is_server = true, .timeout = absl::Seconds(5)});
  ASSERT_TRUE(store.ok());
  const auto start = Clock::now();
  auto v = (*store)->Get("nobody_sets_this", absl::Milliseconds(200));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(v.status().message(), "nobody_sets_this"));
  EXPECT_LT(SecondsSince(start), 2.0);
  ASSERT_TRUE((*store)->Set("after", "ok").ok());
  EXPECT_EQ(*(*store)->Get("after"), "ok");
}

TEST(TcpStoreTest, DeadServerIsReportedNotWaitedFor) {
  auto server = TcpStoreServer::Start({.host = "127.0.0.1", .port = 0});
  ASSERT_TRUE(server.ok());
  auto client = TcpStore::Create({.port = (*server)->port(), .rank = 3,
                                  .connect_timeout = absl::Milliseconds(300)});
  ASSERT_TRUE(client.ok());
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(100));
    (*server)->Stop();
  });
  const auto start = Clock::now();
  auto v = (*client)->Get("k", absl::Seconds(30));
  stopper.join();
  EXPECT_EQ(v.status().code(), absl::StatusCode::kUnavailable) << v.status();
  EXPECT_LT(SecondsSince(start), 5.0);
  // Later calls try to reconnect and fail within connect_timeout.
  EXPECT_FALSE((*client)->Set("k", "v").ok());
}

TEST(TcpStoreTest, LargeValues) {
  auto store = TcpStore::Create({.port = 0, .is_server = true});
  ASSERT_TRUE(store.ok());
  std::string big(3 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>(i / 4096);
  ASSERT_TRUE((*store)->Set("big", big).ok());
  EXPECT_EQ(*(*store)->Get("big"), big);
}

TEST(TcpStoreTest, PortInUseIsAClearError) {
  auto first = TcpStoreServer::Start({.host = "127.0.0.1", .port = 0});
  ASSERT_TRUE(first.ok());
  auto second = TcpStore::Create({.port = (*first)->port(), .is_server = true, .rank = 0});
  ASSERT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), "MASTER_PORT")) << second.status();
}

TEST(TcpStoreTest, ClientNeedsAPort) {
  auto client = TcpStore::Create({.port = 0});
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace weft::comm
