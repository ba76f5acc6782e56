// The convenience flags reach the strategies by name: a ParallelConfig field
// named like an option some registered strategy declares is passed on when
// set, whatever the field (core/runtime/parallel_setup.cc names none).
#include <algorithm>

#include "core/parallel/strategy_options.h"
#include "core/runtime/parallel_setup.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(StrategyFlagsTest, SetFlagsNamedLikeOptionsArePassedOn) {
  ParallelConfig c;
  c.set_zero_stage(2);
  c.set_bucket_mb(12.5);
  c.set_overlap(false);
  c.set_pp_schedule("zbh1");
  c.set_ep(2);
  c.set_backend("gloo");  // a field, but no strategy's option
  c.set_tp(2);            // a mesh degree, not an option
  absl::StatusOr<StrategyOptionValues> v = StrategyOptionsFromConfig(c);
  ASSERT_TRUE(v.ok()) << v.status();
  const std::map<std::string, std::string> want = {{"zero_stage", "2"},
                                                   {"bucket_mb", "12.5"},
                                                   {"overlap", "false"},
                                                   {"pp_schedule", "zbh1"},
                                                   {"ep", "2"}};
  EXPECT_EQ(v->from_flags, want);
}

TEST(StrategyFlagsTest, UnsetFlagsKeepTheSchemaDefaults) {
  absl::StatusOr<StrategyOptionValues> v = StrategyOptionsFromConfig(ParallelConfig());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->from_flags.empty());
}

TEST(StrategyFlagsTest, AnEmptyStringFlagAsksForTheDefault) {
  ParallelConfig c;
  c.set_reduce_dtype("");
  absl::StatusOr<StrategyOptionValues> v = StrategyOptionsFromConfig(c);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->from_flags.at("reduce_dtype"), "auto");
}

TEST(StrategyFlagsTest, EveryBoolOfTheJobIsASwitch) {
  TrainConfig t;
  t.set_recompute(true);
  absl::StatusOr<PlanRequest> r = PlanRequestFromConfig(t, JobTopology());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->switches.at("recompute"));
  absl::StatusOr<ParallelPlan> plan = ParallelPlan::Resolve(*r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<std::string>& names = plan->strategies();
  EXPECT_NE(std::find(names.begin(), names.end(), "recompute"), names.end());
}

}  // namespace
}  // namespace weft
