#include "tools/launch/launch_options.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace weft::launch {
namespace {

TEST(LaunchOptionsTest, ParsesFlagsUntilTheProgram) {
  auto p = ParseLaunchArgs({"--nproc_per_node=4", "--nnodes", "2", "--node_rank=1",
                            "--master_addr=node0", "--master_port=29500", "--output=rank0", "--",
                            "prog", "--nproc_per_node=9"},
                           "output", true);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->options.nproc_per_node, 4);
  EXPECT_EQ(p->options.nnodes, 2);
  EXPECT_EQ(p->options.node_rank, 1);
  EXPECT_EQ(p->options.master_addr, "node0");
  EXPECT_EQ(p->options.master_port, 29500);
  EXPECT_EQ(p->options.output, OutputMode::kRank0);
  EXPECT_EQ(p->options.world_size(), 8);
  EXPECT_EQ(p->rest, (std::vector<std::string>{"prog", "--nproc_per_node=9"}));
}

TEST(LaunchOptionsTest, RelaunchModeKeepsTheProgramsFlags) {
  auto p = ParseLaunchArgs({"--lr=3", "--nproc_per_node", "2", "data.bin", "--output=x.txt",
                            "--launch_output=raw"},
                           "launch_output", false);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->saw_nproc_per_node);
  EXPECT_EQ(p->options.output, OutputMode::kRaw);
  EXPECT_EQ(p->rest, (std::vector<std::string>{"--lr=3", "data.bin", "--output=x.txt"}));
}

TEST(LaunchOptionsTest, ErrorsNameTheFlag) {
  auto unknown = ParseLaunchArgs({"--nproc=2", "--", "p"}, "output", true);
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "--nproc=2")) << unknown.status();
  auto not_int = ParseLaunchArgs({"--nproc_per_node=two"}, "output", true);
  EXPECT_TRUE(absl::StrContains(not_int.status().message(), "--nproc_per_node=two"));
  auto rank = ParseLaunchArgs({"--nproc_per_node=1", "--nnodes=2", "--node_rank=2",
                               "--master_port=1", "--master_addr=h"},
                              "output", true);
  EXPECT_TRUE(absl::StrContains(rank.status().message(), "--node_rank=2 with --nnodes=2"));
  EXPECT_FALSE(ParseLaunchArgs({"--output=all"}, "output", true).ok());
  // Refused up front: 1000 workers ran the machine out of memory.
  auto many = ParseLaunchArgs({"--nproc_per_node=1000", "--", "p"}, "output", true);
  EXPECT_TRUE(absl::StrContains(many.status().message(), "at most 256 workers per node"))
      << many.status();
  EXPECT_FALSE(ParseLaunchArgs({"--nproc_per_node"}, "output", true).ok());
}

}  // namespace
}  // namespace weft::launch
