#include "tools/estimate/planner.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace weft {
namespace {

LayoutEstimate Row(const std::string& label, int64_t peak, bool admitted = true) {
  LayoutEstimate e;
  e.layout.label = label;
  e.micro_batch = 4;
  e.worst.step_peak = peak;
  e.worst.rank = 1;
  if (!admitted) e.status = absl::InvalidArgumentError("not admitted");
  return e;
}

TEST(PlannerTest, PicksTheFirstAdmittedLayoutThatFits) {
  const std::vector<LayoutEstimate> rows = {Row("ddp", 100), Row("zero-1", 10, false),
                                            Row("zero-2", 60), Row("fsdp", 40)};
  absl::StatusOr<LayoutEstimate> pick = PickLayout(rows, 80);
  ASSERT_TRUE(pick.ok()) << pick.status();
  EXPECT_EQ(pick->layout.label, "zero-2");  // zero-1 is smaller but not admitted
  pick = PickLayout(rows, 100);
  ASSERT_TRUE(pick.ok());
  EXPECT_EQ(pick->layout.label, "ddp");  // a peak equal to the budget fits
}

TEST(PlannerTest, NothingFitsNamesTheSmallest) {
  const std::vector<LayoutEstimate> rows = {Row("ddp", 3 << 20), Row("fsdp", 2 << 20)};
  absl::StatusOr<LayoutEstimate> pick = PickLayout(rows, 1 << 20);
  ASSERT_FALSE(pick.ok());
  EXPECT_EQ(pick.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(pick.status().message().find("the smallest is fsdp at 2.0 MiB (rank 1)"),
            std::string::npos)
      << pick.status();
  pick = PickLayout({Row("ddp", 1, false)}, 1 << 20);
  ASSERT_FALSE(pick.ok());
  EXPECT_EQ(pick.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PlannerTest, AutoNeedsABudget) {
  GptJob job;
  job.mutable_train()->mutable_parallel()->set_strategy("auto");
  std::string summary;
  absl::StatusOr<GptJob> planned = PlanAutoLayout(job, 4, &summary);
  ASSERT_FALSE(planned.ok());
  EXPECT_NE(planned.status().message().find("--strategy=auto without --memory_budget"),
            std::string::npos)
      << planned.status();
}

}  // namespace
}  // namespace weft
