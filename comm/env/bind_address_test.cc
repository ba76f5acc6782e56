#include "comm/env/bind_address.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

DistributedEnv TwoNodes(std::string master) {
  DistributedEnv d;
  d.world_size = 4;
  d.local_world_size = 2;
  d.master_addr = std::move(master);
  return d;
}

TEST(BindAddressTest, OneNodeIsLoopback) {
  DistributedEnv d;
  d.world_size = 2;
  d.local_world_size = 2;
  auto a = ResolveBindAddress(d, "", MapEnv({}));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->address, "127.0.0.1");
  // Several launchers simulating nodes on one host: a loopback master.
  a = ResolveBindAddress(TwoNodes("127.0.0.1"), "", MapEnv({}));
  EXPECT_EQ(a->address, "127.0.0.1");
}

TEST(BindAddressTest, InterfaceFromFlagOrEnvironment) {
  auto a = ResolveBindAddress(TwoNodes("10.1.2.3"), "lo", MapEnv({}));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->address, "127.0.0.1");
  EXPECT_TRUE(absl::StrContains(a->reason, "--gloo_iface"));
  a = ResolveBindAddress(TwoNodes("10.1.2.3"), "", MapEnv({{"GLOO_SOCKET_IFNAME", "lo,eth9"}}));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(absl::StrContains(a->reason, "GLOO_SOCKET_IFNAME"));
}

TEST(BindAddressTest, MissingInterfaceIsAClearError) {
  auto a = ResolveBindAddress(TwoNodes("10.1.2.3"), "nosuch0", MapEnv({}));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(a.status().message(), "'nosuch0'")) << a.status();
  EXPECT_TRUE(absl::StrContains(a.status().message(), "lo=127.0.0.1")) << a.status();
  a = ResolveBindAddress(TwoNodes("10.1.2.3"), "", MapEnv({{"GLOO_SOCKET_IFNAME", "nosuch1"}}));
  EXPECT_TRUE(absl::StrContains(a.status().message(), "GLOO_SOCKET_IFNAME")) << a.status();
}

TEST(BindAddressTest, RouteToMasterIsAskedOfTheSocketLayer) {
  // The route to a local address leaves through that address.
  auto a = LocalAddressToward("127.0.0.1");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, "127.0.0.1");
  EXPECT_FALSE(LocalAddressToward("no-such-host.invalid").ok());
}

}  // namespace
}  // namespace weft::comm
