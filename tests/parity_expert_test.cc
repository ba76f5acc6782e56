// Expert parallelism vs one process: the same loss at every step and the
// same parameters and optimizer state after 20 steps, for a tiny GPT whose
// two blocks are both mixture-of-experts (4 experts, top-2, balance and
// z-losses on): dropless with ep=2 and ep=4, ep2 x ddp2, ep2 x fsdp2 (fsdp
// shards the dense weights), with dropping on (capacity factor 1), and
// with ep_overlap=false (the all-to-all without the own-run overlap); and
// ep2 x pp2 x fsdp2 (8 steps, also the gradient norms).
//
// The reference runs one process that routes its batch as one group per
// rank (moe_routing_groups: sample b in group b % world, the samples the
// data sampler deals rank b % world), so the balance loss and (with
// dropping) the per-expert capacity cover the same tokens as each rank's
// own routing under ep. Also checks the all_to_all_v volume and the errors
// for bad sizes.
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

// Expert gradients are summed in another order (tokens from several ranks
// in one grouped GEMM), dense ones over ranks: f32 rounding only.
constexpr double kLossRtol = 1e-4;
constexpr double kParamTol = 1e-3;

constexpr int kExperts = 4, kTopK = 2, kMoeLayers = 2, kChannels = 32, kSeqLen = 16;

GptJob Job(double capacity_factor = 0) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  GptConfig* m = job.mutable_model();
  m->set_moe_every(1);
  m->set_num_experts(kExperts);
  m->set_top_k(kTopK);
  m->set_capacity_factor(static_cast<float>(capacity_factor));
  m->set_moe_aux_loss_coef(0.01f);
  m->set_moe_z_loss_coef(0.001f);
  return job;
}

struct EpCase {
  std::string label;
  int ep;
  int world;
  std::string strategy;  // besides expert ("" lets --ep pick ddp)
  double capacity_factor = 0;
  std::string strategy_options;  // --strategy_options
};

class ExpertParityTest : public ::testing::TestWithParam<EpCase> {};

TEST_P(ExpertParityTest, MatchesOneProcess) {
  const EpCase& c = GetParam();
  GptJob job = Job(c.capacity_factor);
  const int micro = 8 / c.world;  // global batch 8: one micro-batch per rank
  // The reference routes its one micro-batch of 8 as `world` groups: the
  // samples each rank gets (core/nn/moe.h, routing_groups).
  job.mutable_model()->set_moe_routing_groups(c.world);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  job.mutable_model()->set_moe_routing_groups(1);
  job.mutable_train()->set_micro_batch(micro);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_ep(c.ep);
  p->set_strategy(c.strategy);
  p->set_strategy_options(c.strategy_options);
  auto multi = testing::RunMultiProcess(job, c.world);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, c.label);
  std::printf("%s: max loss rdiff %.2e, param diff %.2e\n", c.label.c_str(),
              testing::MaxLossRelDiff(*multi, *single),
              testing::MaxRelativeDifference(multi->params, single->params));

  // all_to_all_v volume per step, as the process group counted it: every
  // kept choice of this rank's tokens leaves it twice (dispatch forward,
  // combine's gradient backward) and comes back twice: tokens x top_k x d x
  // 2 elements sent per MoE layer, f32; the rest of the payload is rows
  // this rank's experts computed for the ep group.
  const double tokens = micro * kSeqLen;
  const double dropped = testing::MeanOverSteps(*multi, "moe_dropped_frac");
  const double own_mb = tokens * kTopK * kChannels * 2 * 4 * kMoeLayers * (1 - dropped) / 1e6;
  EXPECT_NEAR(testing::MeanOverSteps(*multi, "ep_a2a_own_mb"), own_mb, 1e-9) << c.label;
  EXPECT_NEAR(testing::MeanOverSteps(*multi, "ep_a2a_payload_mb"),
              testing::MeanOverSteps(*multi, "ep_a2a_own_mb") + testing::MeanOverSteps(*multi, "ep_a2a_expert_mb"), 1e-9)
      << c.label;
  // Some rows stay on their rank: less leaves it than the payload.
  EXPECT_LT(testing::MeanOverSteps(*multi, "ep_a2a_bus_mb"), testing::MeanOverSteps(*multi, "ep_a2a_payload_mb"));
  EXPECT_GT(testing::MeanOverSteps(*multi, "ep_a2a_bus_mb"), 0);
  if (c.capacity_factor > 0) {
    EXPECT_GT(dropped, 0) << "the capacity case must drop tokens";
    EXPECT_NEAR(dropped, testing::MeanOverSteps(*single, "moe_dropped_frac"), 0.05);
  } else {
    EXPECT_EQ(dropped, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ExpertParityTest,
    ::testing::Values(EpCase{"ep2_dropless", 2, 2, ""}, EpCase{"ep4_dropless", 4, 4, ""},
                      EpCase{"ep2_ddp2", 2, 4, "ddp"}, EpCase{"ep2_fsdp2", 2, 4, "fsdp"},
                      EpCase{"ep2_capacity1", 2, 2, "", 1.0},
                      // The exchange in one piece: no own-run overlap.
                      EpCase{"ep2_no_overlap", 2, 2, "", 0, "ep_overlap=false"}),
    [](const ::testing::TestParamInfo<EpCase>& i) { return i.param.label; });

// ep2 x pp2 x fsdp2 on 4 ranks: each stage's experts split over its 2
// data-parallel ranks, fsdp sharding the dense weights over the same 2.
// ep2 x pp2 x fsdp over `world` ranks against one process: each of the
// world / 2 data-parallel ranks runs micro-batches of 2, routed like the
// reference's micro-batches of 2 x dp in dp groups. Losses, gradient norms
// and parameters.
void ExpectEp2Pp2FsdpMatchesOneProcess(GptJob job, int world, const std::string& label) {
  const int dp = world / 2;
  job.mutable_train()->set_micro_batch(2 * dp);
  job.mutable_model()->set_moe_routing_groups(dp);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  job.mutable_model()->set_moe_routing_groups(1);
  job.mutable_train()->set_micro_batch(2);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_ep(2);
  p->set_pp(2);
  p->set_pp_split("layers");
  p->set_strategy("expert,fsdp");
  auto multi = testing::RunMultiProcess(job, world);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, label);
  testing::ExpectGradNormsMatch(*single, *multi, kLossRtol, label);
  std::printf("%s: max loss rdiff %.2e, grad norm rdiff %.2e, param diff %.2e\n", label.c_str(),
              testing::MaxLossRelDiff(*multi, *single), testing::MaxGradNormRelDiff(*multi, *single),
              testing::MaxRelativeDifference(multi->params, single->params));
}

// The clipping norm must hold every stage's experts once: fsdp used to
// rebuild the norm from its own rank's pieces and drop the other stage's
// sum (and ep's), so the stages clipped differently. 1f1b with experts on
// the second stage only (block 1), gpipe with experts on both.
TEST(ExpertPipelineParityTest, Ep2Pp2Fsdp2MatchesOneProcess) {
  const std::pair<const char*, int> cases[] = {{"1f1b", 2}, {"gpipe", 1}};
  for (const auto& [schedule, moe_every] : cases) {
    GptJob job = Job();
    job.mutable_model()->set_moe_every(moe_every);
    job.mutable_train()->set_steps(8);
    job.mutable_train()->mutable_parallel()->set_pp_schedule(schedule);
    ExpectEp2Pp2FsdpMatchesOneProcess(job, 4,
                                      std::string("ep2 x pp2 x fsdp2 ") + schedule +
                                          " moe_every=" + std::to_string(moe_every));
  }
}

// 8 ranks: pp2 x dp4 with ep2, so each expert block has two replicas per
// stage whose gradients are all-reduced. The stage without experts (block 0)
// used to fail there on the other stage's experts ("tensor is an undefined
// tensor").
TEST(ExpertPipelineParityTest, Ep2ReplicasPp2Fsdp4MatchesOneProcess) {
  GptJob job = Job();
  job.mutable_model()->set_moe_every(2);
  job.mutable_train()->set_steps(3);
  job.mutable_train()->set_global_batch(16);
  ExpectEp2Pp2FsdpMatchesOneProcess(job, 8, "ep2 replicas x pp2 x fsdp4");
}

TEST(ExpertErrorsTest, BadSizes) {
  GptJob job = Job();
  job.mutable_train()->set_micro_batch(2);
  // 6 experts over ep=4.
  job.mutable_model()->set_num_experts(6);
  job.mutable_train()->mutable_parallel()->set_ep(4);
  auto r = testing::RunMultiProcess(job, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("num_experts=6, not divisible by ep=4"), std::string::npos)
      << r.status();
  // ep=3 with 4 data-parallel ranks.
  job.mutable_model()->set_num_experts(6);
  job.mutable_train()->mutable_parallel()->set_ep(3);
  r = testing::RunMultiProcess(job, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ep"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("3"), std::string::npos) << r.status();
  // top_k above the number of experts.
  GptJob k = Job();
  k.mutable_model()->set_num_experts(1);
  auto s = testing::RunSingleProcess(k);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("top_k=2 with num_experts=1"), std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace weft
