// The memory estimator (core/runtime/memory_estimate.h) on mixture-of-experts
// GPTs against the allocator's statistics of real gloo runs: one process,
// expert parallelism over 2 ranks, and the same with a capacity factor. A
// dry run routes round-robin (core/nn/moe.h: an equal share per expert);
// the real router's choices depend on the data, so an expert's buffers, and
// an ep rank's share of the rows, differ from the estimate's by the
// imbalance. At initialisation the router is near uniform: every rank's
// peak must be within 10% of its estimate. The table is printed. The Llama
// mixture of experts (SwiGLU experts) is checked the same way.
#include <cmath>
#include <cstdio>
#include <string>

#include "core/runtime/memory_estimate.h"
#include "gtest/gtest.h"
#include "tests/estimate_rank.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"
#include "tests/tiny_llama.h"

namespace weft {
namespace {

constexpr double kTolerance = 0.10;

struct Case {
  std::string label;
  int world;
  int ep;
  double capacity_factor;
  bool llama = false;
};

// The Llama MoE variant in place of the job's GPT (tests/tiny_llama.h).
testing::RunOptions Options(const Case& c, const GptJob& job) {
  testing::RunOptions o;
  if (!c.llama) return o;
  LlamaConfig l = testing::TinyLlamaMoeConfig();
  l.set_capacity_factor(static_cast<float>(c.capacity_factor));
  o.make_model = testing::LlamaModelFactory(l, job.train().seq_len());
  return o;
}

GptJob MoeJob(const Case& c) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(2);
  job.mutable_train()->set_micro_batch(8 / c.world);  // global batch 8
  GptConfig* m = job.mutable_model();
  m->set_moe_every(1);
  m->set_num_experts(4);
  m->set_top_k(2);
  m->set_capacity_factor(static_cast<float>(c.capacity_factor));
  m->set_moe_aux_loss_coef(0.01f);
  job.mutable_train()->mutable_parallel()->set_ep(c.ep);
  return job;
}

double Error(double estimate, double measured) { return (estimate - measured) / measured; }

class MemoryEstimateMoeTest : public ::testing::TestWithParam<Case> {};

TEST_P(MemoryEstimateMoeTest, EveryRankWithinTolerance) {
  const Case& c = GetParam();
  const GptJob job = MoeJob(c);
  const testing::RunOptions options = Options(c, job);
  absl::StatusOr<testing::ParityRun> run = c.world == 1
                                               ? testing::RunSingleProcess(job, options)
                                               : testing::RunMultiProcess(job, c.world, options);
  ASSERT_TRUE(run.ok()) << c.label << ": " << run.status();
  std::printf("%-12s %4s %10s %10s %8s | %9s %9s (estimate / measured - 1)\n", "layout", "rank",
              "estimate", "measured", "error", "step", "acts");
  for (int rank = 0; rank < c.world; ++rank) {
    absl::StatusOr<MemoryEstimate> e =
        testing::EstimateRank(job, c.world, rank, false, options.make_model);
    ASSERT_TRUE(e.ok()) << c.label << " rank " << rank << ": " << e.status();
    std::map<std::string, double>& m = c.world == 1 ? run->memory : run->rank_memory[rank];
    const double err = Error(static_cast<double>(e->peak()), m["peak"]);
    const double step = Error(static_cast<double>(e->step_peak), m["step_peak"]);
    const double acts = Error(static_cast<double>(e->activations), m["activations"]);
    std::printf("%-12s %4d %10lld %10.0f %+7.2f%% | %+8.2f%% %+8.2f%%\n", c.label.c_str(), rank,
                static_cast<long long>(e->peak()), m["peak"], 100 * err, 100 * step, 100 * acts);
    const std::string where = c.label + " rank " + std::to_string(rank);
    EXPECT_GT(m["peak"], 0) << where;
    EXPECT_LE(std::fabs(err), kTolerance) << where;
    EXPECT_LE(std::fabs(step), kTolerance) << where << " (peak while training)";
    EXPECT_LE(std::fabs(acts), kTolerance) << where << " (activations)";
    // The planner's figure, MoE layers at their routing bound: never below
    // what the run measured, and in one process (nothing to exchange) the
    // balanced estimate itself.
    absl::StatusOr<MemoryEstimate> bound =
        testing::EstimateRank(job, c.world, rank, true, options.make_model);
    ASSERT_TRUE(bound.ok()) << where << ": " << bound.status();
    std::printf("%-12s %4d %10lld bound (%+.2f%%)\n", c.label.c_str(), rank,
                static_cast<long long>(bound->peak()),
                100 * Error(static_cast<double>(bound->peak()), m["peak"]));
    if (c.ep == 1) {
      EXPECT_EQ(bound->peak(), e->peak()) << where;
    } else {
      EXPECT_GE(static_cast<double>(bound->peak()), m["peak"]) << where << " (bound)";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, MemoryEstimateMoeTest,
                         ::testing::Values(Case{"moe", 1, 1, 0}, Case{"ep2", 2, 2, 0},
                                           Case{"ep2_cap1.25", 2, 2, 1.25},
                                           Case{"llama_moe", 1, 1, 0, true},
                                           Case{"llama_ep2", 2, 2, 0, true},
                                           Case{"llama_ep2_cap1.25", 2, 2, 1.25, true}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string s = i.param.label;
                           for (char& ch : s) {
                             if (ch == '.') ch = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace weft
