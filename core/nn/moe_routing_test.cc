// The routing plan: capacity, the drop order (first choices before second
// choices), rows grouped by expert, and the slot <-> row inverse.
#include "core/nn/moe_routing.h"

#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(MoeRoutingTest, CapacityRoundsUpAndDroplessHasNone) {
  EXPECT_EQ(ExpertCapacity(10, 2, 4, 1.0), 5);
  EXPECT_EQ(ExpertCapacity(10, 1, 4, 1.25), 4);  // ceil(3.125)
  EXPECT_EQ(ExpertCapacity(10, 2, 4, 0.0), -1);
  EXPECT_EQ(ExpertCapacity(1, 1, 64, 0.5), 1);
}

TEST(MoeRoutingTest, DroplessGroupsRowsByExpertInTokenOrder) {
  // 3 tokens, k = 2, 3 experts.
  RoutingPlan p = BuildRoutingPlan({2, 0, 0, 1, 2, 1}, 2, 3, -1);
  EXPECT_EQ(p.counts, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(p.dropped, 0);
  // Expert 0: choices 1 (token 0) and 2 (token 1); expert 1: 3, 5; expert 2: 0, 4.
  EXPECT_EQ(p.assign, (std::vector<int32_t>{1, 2, 3, 5, 0, 4}));
  for (size_t row = 0; row < p.assign.size(); ++row) {
    EXPECT_EQ(p.slots[p.assign[row]], static_cast<int32_t>(row));
  }
}

TEST(MoeRoutingTest, SecondChoicesDropBeforeAnotherTokensFirst) {
  // Token 0 picks (1, 0); tokens 1 and 2 pick expert 0 first. Capacity 2:
  // token 0's second choice (expert 0) is offered after both first choices.
  RoutingPlan p = BuildRoutingPlan({1, 0, 0, 1, 0, 1}, 2, 2, 2);
  EXPECT_EQ(p.slots[1], -1);  // token 0's second choice dropped
  EXPECT_GE(p.slots[2], 0);
  EXPECT_GE(p.slots[4], 0);
  // Expert 1 got token 0 first, then token 1's second; token 2's second drops.
  EXPECT_GE(p.slots[0], 0);
  EXPECT_GE(p.slots[3], 0);
  EXPECT_EQ(p.slots[5], -1);
  EXPECT_EQ(p.dropped, 2);
  EXPECT_EQ(p.counts, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(p.routed, (std::vector<int64_t>{3, 3}));
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

TEST(MoeRoutingTest, GroupsHaveTheirOwnCapacityAndComeFirstWithinAnExpert) {
  // 4 tokens, k = 1, 2 experts, all to expert 0; groups {0, 2} and {1, 3}
  // (interleaved, like two ranks' samples) with capacity 1 each.
  RoutingPlan p = BuildGroupedRoutingPlan({0, 0, 0, 0}, 1, 2, {0, 1, 0, 1}, {1, 1});
  EXPECT_EQ(p.counts, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(p.dropped, 2);
  // Token 0 (group 0) then token 1 (group 1) kept; 2 and 3 dropped.
  EXPECT_EQ(p.assign, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(p.slots, (std::vector<int32_t>{0, 1, -1, -1}));
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

// A rank holding tokens 1 and 3 of a 4-token group keeps the group plan's
// decisions for them, with its own row layout, routed and dropped counts.
TEST(MoeRoutingTest, SubsetKeepsTheGroupsDecisions) {
  // k = 1, 2 experts, capacity 1: token 0 and token 1 take the two experts,
  // tokens 2 and 3 are dropped. Alone, tokens 1 and 3 (experts 1, 0) would
  // both have been kept.
  const std::vector<int32_t> all = {0, 1, 0, 1};
  const std::vector<int> group_of = {0, 0, 0, 0};
  RoutingPlan group = BuildGroupedRoutingPlan(all, 1, 2, group_of, {1});
  RoutingPlan mine = SubsetRoutingPlan(group, all, 1, 2, group_of, 1, {1, 3});
  EXPECT_EQ(mine.slots, (std::vector<int32_t>{0, -1}));
  EXPECT_EQ(mine.assign, (std::vector<int32_t>{0}));
  EXPECT_EQ(mine.counts, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(mine.routed, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(mine.dropped, 1);
  // k = 2, two groups: the subset's rows are grouped by expert, then group.
  const std::vector<int32_t> two = {1, 0, 0, 1, 1, 0, 0, 1};
  const std::vector<int> groups = {0, 1, 0, 1};
  RoutingPlan g2 = BuildGroupedRoutingPlan(two, 2, 2, groups, {-1, -1});
  RoutingPlan sub = SubsetRoutingPlan(g2, two, 2, 2, groups, 2, {3, 0});
  // Local token 0 is token 3 (group 1: experts 0, 1), local 1 is token 0
  // (group 0: experts 1, 0). Expert 0: group 0 (choice 3), then group 1
  // (choice 0); expert 1: group 0 (choice 2), then group 1 (choice 1).
  EXPECT_EQ(sub.assign, (std::vector<int32_t>{3, 0, 2, 1}));
  EXPECT_EQ(sub.dropped, 0);
}

}  // namespace
}  // namespace weft
