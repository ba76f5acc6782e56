#include "tools/launch/relaunch.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace weft::launch {
namespace {

// argv as MaybeRelaunchSelf sees it: owned strings, null-terminated.
struct Argv {
  explicit Argv(std::vector<std::string> a) : args(std::move(a)) {
    for (std::string& s : args) ptrs.push_back(s.data());
    ptrs.push_back(nullptr);
  }
  int argc() const { return static_cast<int>(args.size()); }
  std::vector<std::string> args;
  std::vector<char*> ptrs;
};

class RelaunchEnvTest : public ::testing::Test {
 protected:
  void TearDown() override {
    ::unsetenv("RANK");
    ::unsetenv("WORLD_SIZE");
  }
};

// A worker of --nproc_per_node=2 (WORLD_SIZE=2) drops the launch flags and
// runs as its rank.
TEST_F(RelaunchEnvTest, WorkerOfTheSameLaunchRunsAsARank) {
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  Argv a({"train", "--nproc_per_node=2", "--steps=3"});
  int argc = a.argc();
  absl::StatusOr<RelaunchResult> r = MaybeRelaunchSelf(&argc, a.ptrs.data());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->relaunched);
  ASSERT_EQ(argc, 2);
  EXPECT_EQ(std::string(a.ptrs[1]), "--steps=3");
}

// A RANK=0 WORLD_SIZE=1 left in the shell used to turn --nproc_per_node=2
// into a silent one-rank job; it is an error naming both.
TEST_F(RelaunchEnvTest, StaleRankWithAnotherWorldIsAnError) {
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "1", 1);
  Argv a({"train", "--nproc_per_node=2", "--steps=3"});
  int argc = a.argc();
  absl::StatusOr<RelaunchResult> r = MaybeRelaunchSelf(&argc, a.ptrs.data());
  ASSERT_FALSE(r.ok());
  const std::string m(r.status().message());
  EXPECT_TRUE(absl::StrContains(m, "--nproc_per_node=2")) << m;
  EXPECT_TRUE(absl::StrContains(m, "RANK=0 WORLD_SIZE=1")) << m;
}

TEST_F(RelaunchEnvTest, RankWithoutWorldSizeIsAnError) {
  ::setenv("RANK", "0", 1);
  Argv a({"train", "--nproc_per_node=4"});
  int argc = a.argc();
  absl::StatusOr<RelaunchResult> r = MaybeRelaunchSelf(&argc, a.ptrs.data());
  ASSERT_FALSE(r.ok());
  const std::string m(r.status().message());
  EXPECT_TRUE(absl::StrContains(m, "asks for 4 ranks")) << m;
  EXPECT_TRUE(absl::StrContains(m, "WORLD_SIZE=(unset)")) << m;
}

}  // namespace
}  // namespace weft::launch
