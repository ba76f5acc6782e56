#include "comm/env/slurm.h"

#include "gtest/gtest.h"

namespace weft::comm {
namespace {

using Hosts = std::vector<std::string>;

TEST(SlurmNodelistTest, ExpandsRangesKeepingZeroPadding) {
  EXPECT_EQ(*ExpandSlurmNodelist("node[01-03,07]"),
            (Hosts{"node01", "node02", "node03", "node07"}));
  EXPECT_EQ(*ExpandSlurmNodelist("node[8-11]"), (Hosts{"node8", "node9", "node10", "node11"}));
  EXPECT_EQ(*ExpandSlurmNodelist("node[098-101]"), (Hosts{"node098", "node099", "node100", "node101"}));
}

TEST(SlurmNodelistTest, PlainHostsSuffixesAndLists) {
  EXPECT_EQ(*ExpandSlurmNodelist("login1"), (Hosts{"login1"}));
  EXPECT_EQ(*ExpandSlurmNodelist("a1,b[2-3],c"), (Hosts{"a1", "b2", "b3", "c"}));
  EXPECT_EQ(*ExpandSlurmNodelist("gpu-[1-2]-ib"), (Hosts{"gpu-1-ib", "gpu-2-ib"}));
}

TEST(SlurmNodelistTest, SeveralBracketGroupsFormAProduct) {
  EXPECT_EQ(*ExpandSlurmNodelist("rack[1-2]-n[1,3]"),
            (Hosts{"rack1-n1", "rack1-n3", "rack2-n1", "rack2-n3"}));
}

TEST(SlurmNodelistTest, RejectsMalformedLists) {
  for (const char* bad : {"node[01-03", "node]1", "node[3-1]", "node[a-b]", "", "a,,b", "n[]"}) {
    auto hosts = ExpandSlurmNodelist(bad);
    EXPECT_EQ(hosts.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(SlurmTaskCountsTest, ExpandsRepeats) {
  EXPECT_EQ(*ExpandSlurmTaskCounts("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(*ExpandSlurmTaskCounts("8"), (std::vector<int>{8}));
  EXPECT_FALSE(ExpandSlurmTaskCounts("2(x").ok());
  EXPECT_FALSE(ExpandSlurmTaskCounts("two").ok());
}

}  // namespace
}  // namespace weft::comm
