#include "comm/util/socket.h"

#include <sys/socket.h>

#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace weft::comm {
namespace {

TEST(SocketTest, ListenConnectSendRecv) {
  auto listener = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  auto port = LocalPort(listener->get());
  ASSERT_TRUE(port.ok());
  ASSERT_GT(*port, 0);

  std::thread server([&] {
    ScopedFd conn(::accept(listener->get(), nullptr, nullptr));
    char buf[5];
    ASSERT_TRUE(RecvAll(conn.get(), buf, 5, Deadline::After(absl::Seconds(5))).ok());
    ASSERT_TRUE(SendAll(conn.get(), buf, 5, Deadline::After(absl::Seconds(5))).ok());
  });
  auto fd = ConnectTcp("127.0.0.1", *port, Deadline::After(absl::Seconds(5)));
  ASSERT_TRUE(fd.ok()) << fd.status();
  ASSERT_TRUE(SendAll(fd->get(), "hello", 5, Deadline::After(absl::Seconds(5))).ok());
  char echo[5];
  ASSERT_TRUE(RecvAll(fd->get(), echo, 5, Deadline::After(absl::Seconds(5))).ok());
  EXPECT_EQ(std::string(echo, 5), "hello");
  server.join();
  // The peer closed: the next read reports it instead of blocking.
  char more;
  absl::Status closed = RecvAll(fd->get(), &more, 1, Deadline::After(absl::Seconds(5)));
  EXPECT_EQ(closed.code(), absl::StatusCode::kUnavailable) << closed;
}

TEST(SocketTest, RecvTimesOut) {
  auto listener = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  auto fd = ConnectTcp("127.0.0.1", *LocalPort(listener->get()), Deadline::After(absl::Seconds(5)));
  ASSERT_TRUE(fd.ok());
  char c;
  absl::Status s = RecvAll(fd->get(), &c, 1, Deadline::After(absl::Milliseconds(50)));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
}

TEST(SocketTest, ConnectRefusedIsUnavailable) {
  int port = 0;
  {
    auto listener = ListenTcp("127.0.0.1", 0);
    ASSERT_TRUE(listener.ok());
    port = *LocalPort(listener->get());
  }  // closed: nobody listens there now
  auto fd = ConnectTcp("127.0.0.1", port, Deadline::After(absl::Seconds(2)));
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kUnavailable) << fd.status();
}

TEST(SocketTest, LoopbackNames) {
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("node01"));
}

}  // namespace
}  // namespace weft::comm
