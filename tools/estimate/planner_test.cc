#include "tools/estimate/planner.h"

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tools/estimate/budget.h"

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
  EXPECT_NE(pick.status().message().find("the smallest is fsdp at micro-batch 4, 2.0 MiB (rank 1)"),
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

// A mesh axis given with auto is refused, not replaced by the pick.
TEST(PlannerTest, AutoRefusesTheAxesItSets) {
  GptJob job;
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy("auto");
  p->set_memory_budget("1GiB");
  EXPECT_TRUE(CheckAutoAxes(*p).ok());
  p->set_tp(2);
  p->set_dp_shard(2);
  std::string summary;
  absl::StatusOr<GptJob> planned = PlanAutoLayout(job, 4, &summary);
  ASSERT_FALSE(planned.ok());
  EXPECT_NE(planned.status().message().find("--strategy=auto with --tp=2 --dp_shard=2"),
            std::string::npos)
      << planned.status();
}

// A small GPT on 2 ranks over a corpus of its own, planned for real (dry
// runs on the meta device).
GptJob SmallJob() {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/corpus.txt";
  std::ofstream out(path);
  for (int i = 0; i < 200; ++i) out << "the quick brown fox " << i << " jumps over the lazy dog.\n";
  GptJob job;
  GptConfig* m = job.mutable_model();
  m->set_n_layer(2);
  m->set_n_head(2);
  m->set_d_model(64);
  m->set_max_seq_len(64);
  TrainConfig* t = job.mutable_train();
  t->set_seq_len(64);
  t->set_global_batch(16);
  t->set_micro_batch(8);
  t->mutable_data()->set_data(path);
  t->mutable_data()->set_tokenizer("char");
  t->mutable_data()->set_num_workers(1);
  return job;
}

int64_t SmallestPeak(const std::vector<LayoutEstimate>& rows) {
  int64_t smallest = INT64_MAX;
  for (const LayoutEstimate& r : rows) {
    if (r.status.ok()) smallest = std::min(smallest, r.worst.peak());
  }
  return smallest;
}

TEST(PlanLayoutsTest, TheJobAsGivenWhenSomethingFits) {
  const Plan plan = PlanLayouts(SmallJob(), 2, int64_t{1} << 40);
  ASSERT_TRUE(plan.pick.ok()) << plan.pick.status();
  EXPECT_EQ(plan.pick->layout.label, "ddp");
  EXPECT_EQ(plan.pick->recompute, "");
  EXPECT_EQ(plan.relaxed, "");
  for (const LayoutEstimate& r : plan.tried) EXPECT_EQ(r.recompute, "") << r.layout.label;
}

// Below every layout's peak as given, the planner adds recompute (and, if
// that is not enough, smaller micro-batches) instead of giving up; the
// pick's own dry run fits, and it trains with the flags it states.
TEST(PlanLayoutsTest, RecomputesWhenNothingFitsAsGiven) {
  const GptJob job = SmallJob();
  const int64_t budget = SmallestPeak(EstimateLayouts(job, 2)) - 1;
  const Plan plan = PlanLayouts(job, 2, budget);
  ASSERT_TRUE(plan.pick.ok()) << plan.pick.status();
  EXPECT_NE(plan.pick->recompute, "");
  EXPECT_NE(plan.relaxed, "");
  EXPECT_LE(plan.pick->worst.peak(), budget);
  // The first rows are the job as given, none fitting.
  const size_t layouts = CandidateLayouts(2).size();
  ASSERT_GT(plan.tried.size(), layouts);
  for (size_t i = 0; i < layouts; ++i) {
    EXPECT_EQ(plan.tried[i].recompute, "");
    if (plan.tried[i].status.ok()) {
      EXPECT_GT(plan.tried[i].worst.peak(), budget);
    }
  }
  const GptJob planned = WithLayout(job, *plan.pick);
  EXPECT_TRUE(planned.train().recompute());
  EXPECT_EQ(planned.train().parallel().strategy_options(),
            "recompute_policy=" + plan.pick->recompute);
  EXPECT_NE(PickFlags(job, *plan.pick).find("--recompute --strategy_options=recompute_policy="),
            std::string::npos);
  // Re-estimating the planned job gives the pick's peak.
  absl::StatusOr<std::vector<MemoryEstimate>> again = EstimateJob(planned, 2, -1);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(WorstRank(*again).peak(), plan.pick->worst.peak());
}

// A job that recomputes already keeps its policy; the planner goes
// straight to smaller micro-batches.
TEST(PlanLayoutsTest, AJobsOwnRecomputeIsKept) {
  GptJob job = SmallJob();
  job.mutable_train()->set_recompute(true);
  const int64_t budget = SmallestPeak(EstimateLayouts(job, 2)) - 1;
  const Plan plan = PlanLayouts(job, 2, budget);
  for (const LayoutEstimate& r : plan.tried) EXPECT_EQ(r.recompute, "") << r.layout.label;
  ASSERT_TRUE(plan.pick.ok()) << plan.pick.status();
  EXPECT_LT(plan.pick->micro_batch, 8);
  EXPECT_LE(plan.pick->worst.peak(), budget);
  EXPECT_NE(plan.relaxed.find("micro-batch"), std::string::npos) << plan.relaxed;
  // The smaller micro-batch evaluates the job's validation samples, not
  // eval_batches of its own size.
  const GptJob planned = WithLayout(job, *plan.pick);
  const int64_t samples = job.train().eval_batches() * job.train().micro_batch();
  EXPECT_EQ(planned.train().eval_samples(), samples);
  EXPECT_NE(PickFlags(job, *plan.pick).find(absl::StrCat("--eval_samples=", samples)),
            std::string::npos)
      << PickFlags(job, *plan.pick);
}

// An MoE model (8 experts in both blocks, most of its parameters) on 4
// ranks: the expert-parallel layouts are estimated at their routing bound
// (every rank's rows to one rank's experts, within capacity: a budget must
// hold whatever the router does), hold less than ddp and zero-2 with a
// capacity factor, and with a budget between ep4 x ddp4 and zero-2 the
// planner picks expert parallelism, with --ep in its flags, and the planned
// job re-estimates to the pick's peak.
TEST(PlanLayoutsTest, MoeModelsGetExpertParallelLayouts) {
  GptJob job = SmallJob();
  job.mutable_model()->set_moe_every(1);
  job.mutable_model()->set_num_experts(8);
  job.mutable_model()->set_top_k(2);
  job.mutable_model()->set_capacity_factor(1.25f);
  const std::vector<LayoutEstimate> rows = EstimateLayouts(job, 4);
  const LayoutEstimate* zero2 = nullptr;
  const LayoutEstimate* ep4 = nullptr;
  for (const LayoutEstimate& r : rows) {
    if (r.layout.label == "zero-2") zero2 = &r;
    if (r.layout.label == "ep4 x ddp4") ep4 = &r;
  }
  ASSERT_NE(zero2, nullptr);
  ASSERT_NE(ep4, nullptr);
  ASSERT_TRUE(ep4->status.ok()) << ep4->status;
  ASSERT_TRUE(zero2->status.ok()) << zero2->status;
  ASSERT_LT(ep4->worst.peak(), zero2->worst.peak());
  const int64_t budget = (ep4->worst.peak() + zero2->worst.peak()) / 2;
  const Plan plan = PlanLayouts(job, 4, budget);
  ASSERT_TRUE(plan.pick.ok()) << plan.pick.status();
  EXPECT_EQ(plan.pick->layout.ep, 4) << plan.pick->layout.label;
  EXPECT_NE(PickFlags(job, *plan.pick).find("--ep=4"), std::string::npos)
      << PickFlags(job, *plan.pick);
  const GptJob planned = WithLayout(job, *plan.pick);
  EXPECT_EQ(planned.train().parallel().ep(), 4);
  absl::StatusOr<std::vector<MemoryEstimate>> again =
      EstimateJob(planned, 4, -1, /*moe_routing_bound=*/true);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(WorstRank(*again).peak(), plan.pick->worst.peak());
  // The bound is above the balanced estimate: the router can send a rank
  // more than its share (a pick from balanced estimates ran 12% over its
  // budget on a real run).
  absl::StatusOr<std::vector<MemoryEstimate>> balanced = EstimateJob(planned, 4, -1);
  ASSERT_TRUE(balanced.ok()) << balanced.status();
  EXPECT_GT(plan.pick->worst.activations, WorstRank(*balanced).activations);
}

// Dropless, one rank's experts may receive every rank's rows: the bound at
// ep4 is four times the balanced expert rows, and ep4 x ddp4 no longer
// looks smaller than it can get.
TEST(PlanLayoutsTest, DroplessExpertParallelismIsEstimatedAtItsBound) {
  GptJob job = SmallJob();
  job.mutable_model()->set_moe_every(1);
  job.mutable_model()->set_num_experts(8);
  job.mutable_model()->set_top_k(2);
  GptJob capped = job;
  capped.mutable_model()->set_capacity_factor(1.25f);
  auto ep4 = [](const std::vector<LayoutEstimate>& rows) -> int64_t {
    for (const LayoutEstimate& r : rows) {
      if (r.layout.label == "ep4 x ddp4" && r.status.ok()) return r.worst.activations;
    }
    return -1;
  };
  const int64_t dropless = ep4(EstimateLayouts(job, 4));
  const int64_t with_capacity = ep4(EstimateLayouts(capped, 4));
  ASSERT_GT(with_capacity, 0);
  EXPECT_GT(dropless, with_capacity);
}

TEST(PlanLayoutsTest, NothingFitsAfterEverythingWasTried) {
  const Plan plan = PlanLayouts(SmallJob(), 2, 1024);
  ASSERT_FALSE(plan.pick.ok());
  EXPECT_EQ(plan.pick.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(plan.pick.status().message().find("also tried with recompute and with smaller"),
            std::string::npos)
      << plan.pick.status();
  // The smallest named is over every step's rows, recompute included.
  EXPECT_NE(plan.pick.status().message().find("recompute at micro-batch 1"), std::string::npos)
      << plan.pick.status();
}

}  // namespace
}  // namespace weft
