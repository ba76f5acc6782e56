#include "core/parallel/reduce_groups.h"

#include "gtest/gtest.h"

namespace weft {
namespace {

const std::vector<std::string> kDp = {"dp_replicate", "dp_shard"};

Parameter Dense(const std::string& name) {
  Parameter p(name, {4, 4}, InitSpec::Zeros(), true);
  p.set_name(name);
  return p;
}

// An expert weight: its first dimension split over dp_shard (2 ranks).
Parameter Expert(const std::string& name) {
  Parameter p = Dense(name);
  Placement placement;
  placement.Shard("dp_shard", 0, 1, 2);
  EXPECT_TRUE(p.SetPlacement(placement).ok());
  return p;
}

TEST(ReduceGroupsTest, ShardedAxesAreLeftOut) {
  EXPECT_EQ(ReduceAxes(Dense("w"), kDp), kDp);
  EXPECT_EQ(ReduceAxes(Expert("e"), kDp), (std::vector<std::string>{"dp_replicate"}));
  Parameter flat = Dense("f");
  flat.AddFlatShard("dp_replicate", 0, 8);
  EXPECT_EQ(ReduceAxes(flat, kDp), (std::vector<std::string>{"dp_shard"}));
}

TEST(ReduceGroupsTest, GroupsKeepOrderOfFirstAppearance) {
  Parameter a = Dense("a"), e1 = Expert("e1"), b = Dense("b"), e2 = Expert("e2");
  const std::vector<ReduceGroup> g = GroupByReduceAxes({&a, &e1, &b, &e2}, kDp);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].axes, kDp);
  EXPECT_EQ(g[0].params, (std::vector<Parameter*>{&a, &b}));
  EXPECT_EQ(g[1].axes, (std::vector<std::string>{"dp_replicate"}));
  EXPECT_EQ(g[1].params, (std::vector<Parameter*>{&e1, &e2}));
}

TEST(ReduceGroupsTest, ShardingStrategiesRefuseAlreadyShardedParameters) {
  Parameter a = Dense("a"), e = Expert("experts.0.w");
  EXPECT_TRUE(CheckNotShardedOver({&a}, "dp_shard", "fsdp").ok());
  const absl::Status s = CheckNotShardedOver({&a, &e}, "dp_shard", "fsdp");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("experts.0.w is already sharded over it"), std::string::npos) << s;
}

}  // namespace
}  // namespace weft
