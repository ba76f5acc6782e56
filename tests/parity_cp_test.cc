// Context parallelism vs one process: the same loss at every step and the
// same parameters and optimizer state after 20 steps at seq_len 256, for
// cp=2, cp=4, cp2 x fsdp2 and cp2 x ddp2, and with dropout 0.1 (masks of
// the chunks' global positions) for cp=2, cp2 x tp2, cp2 x fsdp2 and
// cp2 x zero-2. The ring's traffic per
// step, counted by its process group, must equal the K/V ring formula, and
// the step's comm_mb must be the ring plus the gradient all-reduce plus the
// loss sum.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

// As the dp tests: only f32 summation order differs (the log-sum-exp merge
// of blocks, gradients summed over ranks).
constexpr double kLossRtol = 1e-4;
constexpr double kParamTol = 1e-3;
constexpr int kSeqLen = 256;

GptJob CpJob() {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  job.mutable_train()->set_seq_len(kSeqLen);
  // 20 steps x 2 samples stay within the corpus's first epoch at this
  // length (epoch boundaries are covered by tests/parity_ddp_test).
  job.mutable_train()->set_global_batch(2);
  job.mutable_train()->set_micro_batch(1);  // 2 accumulation steps (1 with dp2)
  job.mutable_model()->set_max_seq_len(kSeqLen);
  return job;
}

struct CpCase {
  std::string label;
  int cp;
  int dp_shard = 1;
  std::string dp_strategy;  // "" or a data-parallel strategy over dp_shard ranks
  float dropout = 0;
};

class ContextParallelParityTest : public ::testing::TestWithParam<CpCase> {};

TEST_P(ContextParallelParityTest, MatchesOneProcess) {
  const CpCase& c = GetParam();
  GptJob job = CpJob();
  job.mutable_model()->set_dropout(c.dropout);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_cp(c.cp);
  p->set_dp_shard(c.dp_shard);
  p->set_strategy(c.dp_strategy);
  auto multi = testing::RunMultiProcess(job, c.cp * c.dp_shard);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, c.label);

  // Ring volume per rank and step: every layer and micro-batch sends and
  // receives (cp - 1) K/V blocks forward, (cp - 1) K/V blocks plus cp dK/dV
  // blocks backward; a block is (micro_batch, seq_len / cp, 2 d_model) f32.
  const TrainConfig& t = job.train();
  const int64_t micro_batches = t.global_batch() / (t.micro_batch() * c.dp_shard);
  const double block = 4.0 * t.micro_batch() * (kSeqLen / c.cp) * 2 * job.model().d_model();
  const double ring = job.model().n_layer() * micro_batches * 2 * block * (3 * c.cp - 2);
  ASSERT_FALSE(std::isnan(testing::LastStep(*multi, "cp_ring_mb"))) << c.label;
  EXPECT_DOUBLE_EQ(testing::LastStep(*multi, "cp_ring_mb") * (1 << 20), ring) << c.label;
  if (c.dp_strategy.empty()) {
    // Everything else a cp-only step moves: one all-reduce of every
    // gradient over cp, and the loss (one f32) summed over cp. The gradient
    // norm needs no collective: every cp rank holds whole gradients.
    double param_bytes = 0;
    for (const auto& [name, v] : multi->params) param_bytes += 4.0 * v.size();
    for (size_t s = 0; s < multi->comm_mb.size(); ++s) {
      EXPECT_DOUBLE_EQ(multi->comm_mb[s] * (1 << 20), ring + param_bytes + 4.0)
          << c.label << " step " << s + 1;
    }
  }
  const double loss_rdiff = testing::MaxLossRelDiff(*multi, *single);
  std::printf(
      "%s: max loss rdiff %.2e, param diff %.2e; ring %.0f B/step per rank (formula "
      "%.0f), comm_mb %.6f\n",
      c.label.c_str(), loss_rdiff, testing::MaxRelativeDifference(multi->params, single->params),
      testing::LastStep(*multi, "cp_ring_mb") * (1 << 20), ring,
      multi->comm_mb.empty() ? 0.0 : multi->comm_mb.back());
}

INSTANTIATE_TEST_SUITE_P(Cases, ContextParallelParityTest,
                         ::testing::Values(CpCase{"cp2", 2}, CpCase{"cp4", 4},
                                           CpCase{"cp2_fsdp2", 2, 2, "fsdp"},
                                           CpCase{"cp2_ddp2", 2, 2, "ddp"},
                                           CpCase{"cp2_dropout", 2, 1, "", 0.1f}),
                         [](const ::testing::TestParamInfo<CpCase>& i) { return i.param.label; });

// Recompute under cp, whole blocks or only the attention (which cp swapped
// for RingAttention): the same numbers as cp2 without it, bitwise, and the
// replayed forwards send their K/V blocks around the ring again.
TEST(ContextParallelRecomputeTest, FullAndAttentionPoliciesReplayTheRing) {
  GptJob job = CpJob();
  job.mutable_train()->set_steps(6);
  job.mutable_model()->set_dropout(0.1f);  // the replays must draw the same masks
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_cp(2);
  auto plain = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(plain.ok()) << plain.status();
  const TrainConfig& t = job.train();
  const double block = 4.0 * t.micro_batch() * (kSeqLen / 2) * 2 * job.model().d_model();
  const double replay = job.model().n_layer() * (t.global_batch() / t.micro_batch()) * 2 * block;
  for (const std::string policy : {"full", "attention"}) {
    p->set_strategy("recompute");
    p->set_strategy_options("recompute_policy=" + policy);
    auto run = testing::RunMultiProcess(job, 2);
    ASSERT_TRUE(run.ok()) << policy << ": " << run.status();
    testing::ExpectParity(*plain, *run, 0, 0, "cp2 recompute_policy=" + policy);
    EXPECT_DOUBLE_EQ(
        (testing::LastStep(*run, "cp_ring_mb") - testing::LastStep(*plain, "cp_ring_mb")) *
            (1 << 20),
        replay)
        << policy;
  }
}

TEST(ContextParallelErrorsTest, SeqLenNotDivisibleByTwiceCp) {
  GptJob job = CpJob();
  job.mutable_train()->set_seq_len(250);
  job.mutable_train()->set_steps(1);
  job.mutable_train()->mutable_parallel()->set_cp(2);
  auto run = testing::RunMultiProcess(job, 2);
  ASSERT_FALSE(run.ok());
  const std::string m(run.status().message());
  EXPECT_NE(m.find("seq_len=250 with --cp=2"), std::string::npos) << m;
  EXPECT_NE(m.find("divisible by 2 x cp = 4"), std::string::npos) << m;
  EXPECT_NE(m.find("--seq_len=248 or 252"), std::string::npos) << m;
  // At startup, when cp is applied, not at the first forward.
  EXPECT_NE(m.find("applying strategy 'cp'"), std::string::npos) << m;
}

// (cp with pp: tests/parity_cp_pp_test; cp with MoE: tests/parity_cp_moe_test.)

// cp2 x (fsdp2 or zero-2 over 2 ranks) with dropout, against one process:
// masks are keyed by each sample's place in the global batch and each
// element's global position in the sequence, so the 4 ranks draw exactly
// one process's masks.
struct CpDpCase {
  std::string label;
  std::string strategy;
  int zero_stage = 1;
};

class ContextParallelDropoutTest : public ::testing::TestWithParam<CpDpCase> {};

TEST_P(ContextParallelDropoutTest, Cp2MatchesOneProcess) {
  const CpDpCase& c = GetParam();
  GptJob job = CpJob();
  job.mutable_model()->set_dropout(0.1f);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy(c.strategy);
  p->set_zero_stage(c.zero_stage);
  p->set_dp_shard(2);
  p->set_cp(2);
  auto multi = testing::RunMultiProcess(job, 4);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, c.label);
  std::printf("%s vs one process: max loss rdiff %.2e, param diff %.2e\n", c.label.c_str(),
              testing::MaxLossRelDiff(*multi, *single),
              testing::MaxRelativeDifference(multi->params, single->params));
}

INSTANTIATE_TEST_SUITE_P(Cases, ContextParallelDropoutTest,
                         ::testing::Values(CpDpCase{"cp2_fsdp2_dropout", "fsdp"},
                                           CpDpCase{"cp2_zero2_dropout", "zero", 2}),
                         [](const ::testing::TestParamInfo<CpDpCase>& i) { return i.param.label; });

// cp2 x tp2 on 4 ranks: each rank's ring carries the K/V blocks of its own
// tp heads only, half a cp-only block. With dropout, the tp ranks hold
// whole residual tensors (after the row-parallel all-reduce) and draw the
// masks of their chunks, like cp alone. (cp with sp: tests/parity_cp_sp_test.)
struct CpTpCase {
  std::string label;
  std::string strategy;  // tp
  float dropout = 0;
};

class ContextTensorParallelParityTest : public ::testing::TestWithParam<CpTpCase> {};

TEST_P(ContextTensorParallelParityTest, Cp2Tp2MatchesOneProcess) {
  const CpTpCase& c = GetParam();
  GptJob job = CpJob();
  job.mutable_model()->set_dropout(c.dropout);
  const std::string& label = c.label;
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_cp(2);
  p->set_tp(2);
  p->set_strategy(c.strategy);
  auto multi = testing::RunMultiProcess(job, 4);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, label);
  const TrainConfig& t = job.train();
  const int64_t micro_batches = t.global_batch() / t.micro_batch();
  const double block = 4.0 * t.micro_batch() * (kSeqLen / 2) * 2 * job.model().d_model() / 2;
  const double ring = job.model().n_layer() * micro_batches * 2 * block * (3 * 2 - 2);
  ASSERT_FALSE(std::isnan(testing::LastStep(*multi, "cp_ring_mb")));
  EXPECT_DOUBLE_EQ(testing::LastStep(*multi, "cp_ring_mb") * (1 << 20), ring);
  std::printf("%s: max loss rdiff %.2e, param diff %.2e; ring %.0f B/step per rank (formula "
              "%.0f)\n",
              label.c_str(), testing::MaxLossRelDiff(*multi, *single),
              testing::MaxRelativeDifference(multi->params, single->params),
              testing::LastStep(*multi, "cp_ring_mb") * (1 << 20), ring);
}

INSTANTIATE_TEST_SUITE_P(Cases, ContextTensorParallelParityTest,
                         ::testing::Values(CpTpCase{"cp2_tp2", "tp"},
                                           CpTpCase{"cp2_tp2_dropout", "tp", 0.1f}),
                         [](const ::testing::TestParamInfo<CpTpCase>& i) { return i.param.label; });

}  // namespace
}  // namespace weft
