// Context parallelism with MoE layers vs one process: the same loss at every
// step and the same parameters and optimizer state after 20 steps, for a
// tiny GPT whose two blocks are both mixture-of-experts (4 experts, top-2,
// balance loss and z-loss on), at seq_len 64:
//   cp2 dropless; cp2 with a capacity that drops choices (the drops must
//   happen, and be one process's: the capacity counts the whole sequences
//   and choices are offered in global token order); cp2 with two routing
//   groups; cp2 x dp2 with expert parallelism (ep2 along dp_shard; the
//   reference routes its batch as the two dp ranks' groups); cp2 x pp2.
// The cp-only cases also evaluate one process's validation loss and report
// one process's MoE metrics (moe_aux_loss,
// moe_z_loss, loads, moe_dropped_frac) at every step, and the routing
// exchange's traffic (cp_moe_mb) must equal the formula of
// strategies/cp/cp_routing_exchange.h. Recompute under cp replays routing
// (its exchange again, without the statistics) and changes nothing.
// cp2 x sp2 with MoE matches one process too.
#include <cmath>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

// Summation order only (ring attention's block merge, expert rows of
// several ranks in one GEMM, gradients summed over ranks).
constexpr double kLossRtol = 1e-4;
constexpr double kParamTol = 1e-3;
constexpr int kSeqLen = 64, kExperts = 4, kTopK = 2, kMoeLayers = 2;

GptJob MoeJob(double capacity_factor, int global_batch, int micro_batch) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  TrainConfig* t = job.mutable_train();
  t->set_steps(20);
  t->set_seq_len(kSeqLen);
  t->set_global_batch(global_batch);
  t->set_micro_batch(micro_batch);
  GptConfig* m = job.mutable_model();
  m->set_max_seq_len(kSeqLen);
  m->set_moe_every(1);
  m->set_num_experts(kExperts);
  m->set_top_k(kTopK);
  m->set_capacity_factor(static_cast<float>(capacity_factor));
  m->set_moe_aux_loss_coef(0.01f);
  m->set_moe_z_loss_coef(0.001f);
  return job;
}

// Rank 0's MoE metrics at every step equal one process's: the counts
// exactly, the losses up to f32 rounding of the router.
void ExpectSameMoeMetrics(const testing::ParityRun& single, const testing::ParityRun& multi,
                          const std::string& label) {
  ASSERT_EQ(single.step_metrics.size(), multi.step_metrics.size()) << label;
  for (size_t s = 0; s < single.step_metrics.size(); ++s) {
    for (const char* key : {"moe_dropped_frac", "moe_load_min", "moe_load_max", "moe_load_cv"}) {
      ASSERT_TRUE(multi.step_metrics[s].count(key)) << label << " " << key;
      EXPECT_NEAR(multi.step_metrics[s].at(key), single.step_metrics[s].at(key), 1e-12)
          << label << " step " << s + 1 << " " << key;
    }
    for (const char* key : {"moe_aux_loss", "moe_z_loss"}) {
      const double want = single.step_metrics[s].at(key);
      EXPECT_NEAR(multi.step_metrics[s].at(key), want, 1e-4 * std::fabs(want))
          << label << " step " << s + 1 << " " << key;
    }
  }
}

struct CpMoeCase {
  std::string label;
  double capacity_factor = 0;
  int routing_groups = 1;  // in both runs
  int dp_shard = 1;        // > 1: with ep = dp_shard (expert strategy)
  int pp = 1;
};

class CpMoeParityTest : public ::testing::TestWithParam<CpMoeCase> {};

TEST_P(CpMoeParityTest, MatchesOneProcess) {
  const CpMoeCase& c = GetParam();
  // Two micro-batches of two samples per data-parallel rank.
  const int micro = 2;
  GptJob job = MoeJob(c.capacity_factor, 2 * micro * c.dp_shard, micro);
  // The reference routes each micro-batch as the dp ranks' groups: one
  // process's micro-batch holds all dp ranks' samples (sample b of dp rank
  // b % dp_shard).
  job.mutable_model()->set_moe_routing_groups(c.routing_groups * c.dp_shard);
  job.mutable_train()->set_micro_batch(micro * c.dp_shard);
  // Validation batches are the data-parallel rank's: cp alone evaluates
  // one process's samples (its routing through the exchange too).
  const bool cp_only = c.dp_shard == 1 && c.pp == 1;
  const testing::RunOptions options{.eval_batches = cp_only ? 2 : 0};
  auto single = testing::RunSingleProcess(job, options);
  ASSERT_TRUE(single.ok()) << single.status();
  job.mutable_model()->set_moe_routing_groups(c.routing_groups);
  job.mutable_train()->set_micro_batch(micro);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_cp(2);
  p->set_pp(c.pp);
  p->set_dp_shard(c.dp_shard);
  if (c.dp_shard > 1) p->set_ep(c.dp_shard);
  auto multi = testing::RunMultiProcess(job, 2 * c.dp_shard * c.pp, options);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, c.label);

  const double dropped = testing::MeanOverSteps(*multi, "moe_dropped_frac");
  if (c.capacity_factor > 0) {
    EXPECT_GT(dropped, 0) << c.label << ": the capacity case must drop choices";
  } else if (!std::isnan(dropped)) {
    EXPECT_EQ(dropped, 0) << c.label;
  }
  if (cp_only) {
    ASSERT_TRUE(single->val_loss.has_value() && multi->val_loss.has_value()) << c.label;
    EXPECT_NEAR(*multi->val_loss, *single->val_loss, kLossRtol * *single->val_loss) << c.label;
    ExpectSameMoeMetrics(*single, *multi, c.label);
    // Per step and rank, per MoE layer and micro-batch: the other rank's
    // choices (micro x seq_len / 2 tokens x k int32) and its statistics
    // ((routing_groups x E + 1) doubles).
    const double per_call = micro * (kSeqLen / 2) * kTopK * 4 + (c.routing_groups * kExperts + 1) * 8;
    EXPECT_DOUBLE_EQ(testing::LastStep(*multi, "cp_moe_mb") * (1 << 20),
                     kMoeLayers * 2 * per_call)
        << c.label;
  }
  std::printf("%s: max loss rdiff %.2e, param diff %.2e, dropped frac %.4f (one process "
              "%.4f), cp_moe %.0f B/step per rank\n",
              c.label.c_str(), testing::MaxLossRelDiff(*multi, *single),
              testing::MaxRelativeDifference(multi->params, single->params), dropped,
              testing::MeanOverSteps(*single, "moe_dropped_frac"),
              testing::LastStep(*multi, "cp_moe_mb") * (1 << 20));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CpMoeParityTest,
    ::testing::Values(CpMoeCase{"cp2_dropless"}, CpMoeCase{"cp2_capacity", 0.75},
                      CpMoeCase{"cp2_routing_groups2", 0.75, 2},
                      // Mesh [dp_shard=2, cp=2], ep2 along dp_shard.
                      CpMoeCase{"cp2_dp2_ep2", 0, 1, 2}, CpMoeCase{"cp2_dp2_ep2_capacity", 0.75, 1, 2},
                      CpMoeCase{"cp2_pp2", 0.75, 1, 1, 2}),
    [](const ::testing::TestParamInfo<CpMoeCase>& i) { return i.param.label; });

// Recompute replays each MoE forward, routing included: the replays gather
// the choices again (the same ones) but count no statistics, so losses,
// parameters and MoE metrics are bitwise those of cp2 without recompute,
// and the exchange moves the choices once more per layer and micro-batch.
TEST(CpMoeRecomputeTest, ReplaysRoutingWithoutCountingTwice) {
  GptJob job = MoeJob(0.75, 4, 2);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_cp(2);
  auto plain = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(plain.ok()) << plain.status();
  p->set_strategy("recompute");
  p->set_strategy_options("recompute_policy=full");
  auto run = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(run.ok()) << run.status();
  testing::ExpectParity(*plain, *run, 0, 0, "cp2 recompute vs cp2");
  testing::ExpectParity(*single, *run, kLossRtol, kParamTol, "cp2 recompute vs one process");
  ExpectSameMoeMetrics(*single, *run, "cp2 recompute");
  ASSERT_EQ(plain->step_metrics.size(), run->step_metrics.size());
  for (size_t s = 0; s < run->step_metrics.size(); ++s) {
    for (const auto& [key, value] : plain->step_metrics[s]) {
      if (key.rfind("moe_", 0) == 0) {
        EXPECT_EQ(run->step_metrics[s].at(key), value) << key;
      }
    }
  }
  EXPECT_GT(testing::MeanOverSteps(*run, "moe_dropped_frac"), 0);
  const double replay = kMoeLayers * 2 * (2 * (kSeqLen / 2) * kTopK * 4);
  EXPECT_DOUBLE_EQ(
      (testing::LastStep(*run, "cp_moe_mb") - testing::LastStep(*plain, "cp_moe_mb")) * (1 << 20),
      replay);
  std::printf("cp2_recompute: max loss rdiff %.2e, param diff %.2e vs one process; replay "
              "exchange %.0f B/step\n",
              testing::MaxLossRelDiff(*run, *single),
              testing::MaxRelativeDifference(run->params, single->params), replay);
}

// cp2 x sp2 (4 ranks): the MoE layers run on the rank's chunks gathered
// from the sp blocks (strategies/tp/sequence_gathered.h), route them with
// the cp exchange like cp alone, and split the experts over tp.
TEST(CpMoeSequenceParallelTest, Cp2Sp2MatchesOneProcess) {
  GptJob job = MoeJob(0.75, 4, 2);
  job.mutable_model()->set_n_head(4);
  const testing::RunOptions options{.eval_batches = 2};
  auto single = testing::RunSingleProcess(job, options);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_cp(2);
  p->set_tp(2);
  p->set_strategy("sp");
  auto multi = testing::RunMultiProcess(job, 4, options);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, "cp2 x sp2");
  testing::ExpectGradNormsMatch(*single, *multi, kLossRtol, "cp2 x sp2");
  ExpectSameMoeMetrics(*single, *multi, "cp2 x sp2");
  EXPECT_GT(testing::MeanOverSteps(*multi, "moe_dropped_frac"), 0);
  ASSERT_TRUE(single->val_loss.has_value() && multi->val_loss.has_value());
  EXPECT_NEAR(*multi->val_loss, *single->val_loss, kLossRtol * *single->val_loss);
  std::printf("cp2_sp2: max loss rdiff %.2e, param diff %.2e, dropped frac %.4f (one process "
              "%.4f)\n",
              testing::MaxLossRelDiff(*multi, *single),
              testing::MaxRelativeDifference(multi->params, single->params),
              testing::MeanOverSteps(*multi, "moe_dropped_frac"),
              testing::MeanOverSteps(*single, "moe_dropped_frac"));
}

}  // namespace
}  // namespace weft
