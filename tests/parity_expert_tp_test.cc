// Expert parallelism with tensor parallelism (Megatron's expert tensor
// parallelism) vs one process, 20 steps, dp tolerances, dropless routing:
// tp2 on a GPT-MoE (no ep), and ep2 x tp2 on 4 ranks. The dense parts are
// tp-sharded as for the dense GPT; in each MoE layer the router is
// replicated over tp and every expert's hidden units are split over tp
// (core/nn/expert_mlps.h, strategies/tp/parallel_experts.h), so no expert
// computation is repeated across tp. Checks the loss per step, parameters,
// the gradient norm, and the tp and ep traffic per step against the
// formulas below. Under sp (sp2, ep2 x sp2) each MoE layer runs on the
// sequence gathered from the sp blocks (strategies/tp/sequence_gathered.h).
// ep2 x tp2 and ep2 x sp2 with fsdp over the ep group, 6 steps.
// An expert size tp does not divide is refused.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/base/status_macros.h"
#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

constexpr double kLossRtol = 1e-4;
constexpr double kParamTol = 1e-3;
constexpr int kExperts = 4, kTopK = 2, kChannels = 32, kSeqLen = 16, kLayers = 2;

GptJob Job(int moe_every) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  GptConfig* m = job.mutable_model();
  m->set_n_head(4);
  m->set_moe_every(moe_every);
  m->set_num_experts(kExperts);
  m->set_top_k(kTopK);
  m->set_moe_aux_loss_coef(0.01f);
  m->set_moe_z_loss_coef(0.001f);
  return job;
}

double Get(const testing::ParityRun& run, const std::string& key) {
  auto it = run.comm.find(key);
  return it == run.comm.end() ? 0.0 : it->second;
}

void Check(const testing::ParityRun& single, const testing::ParityRun& run,
           const std::string& label) {
  std::printf("%s: loss %.4f -> %.4f, max loss rel diff %.2e, max param diff %.2e, "
              "max grad norm rel diff %.2e\n",
              label.c_str(), run.losses.front(), run.losses.back(),
              testing::MaxLossRelDiff(run, single),
              testing::MaxRelativeDifference(run.params, single.params),
              testing::MaxGradNormRelDiff(run, single));
  testing::ExpectParity(single, run, kLossRtol, kParamTol, label);
  // The clipping norm: tp-split pieces summed over tp, the experts over ep,
  // replicated pieces (router, expert output biases) once.
  testing::ExpectGradNormsMatch(single, run, kLossRtol, label);
  EXPECT_EQ(testing::MeanOverSteps(run, "moe_dropped_frac"), 0) << label;
}

// tp all-reduce payload per step (bytes, f32), per micro-batch of B x T
// tokens of width C (S = 4 B T C), L layers of which D dense:
//   dense regions  every layer leaves attn.proj in forward and enters qkv
//                  in backward; a dense MLP adds fc (backward) and proj
//                  (forward); the embedding and the head add one each:
//                  (2 L + 2 D + 2) S
//   cross-entropy  row max, summed exponentials and target logits: 12 B T
//   experts        the partial outputs (forward) and partial input
//                  gradients (backward) of the rows this rank's experts
//                  computed: 2 x 4 C per row, per MoE layer; without ep
//                  every routed row (B T k per layer), with ep exactly the
//                  expert-side bytes the ep all_to_all_v sends back
//                  (ep_a2a_expert_mb: outputs and input gradients).
double DenseAndLossBytes(const GptJob& job, int dense_layers) {
  const double b = job.train().micro_batch(), t = job.train().seq_len();
  const double s = 4 * b * t * kChannels;
  return (2 * kLayers + 2 * dense_layers + 2) * s + 12 * b * t;
}

TEST(ExpertTpParityTest, Tp2OnGptMoeMatchesOneProcess) {
  // Block 0 dense, block 1 MoE: both halves of the plan.
  GptJob job = Job(/*moe_every=*/2);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  job.mutable_train()->mutable_parallel()->set_strategy("tp");
  job.mutable_train()->mutable_parallel()->set_tp(2);
  auto multi = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(multi.ok()) << multi.status();
  Check(*single, *multi, "tp2 GPT-MoE");
  const double b = job.train().micro_batch();
  const double experts = 2.0 * b * kSeqLen * kTopK * kChannels * 4 * /*MoE layers*/ 1;
  EXPECT_DOUBLE_EQ(Get(*multi, "tp_all_reduce_payload"),
                   DenseAndLossBytes(job, /*dense_layers=*/1) + experts);
  EXPECT_EQ(Get(*multi, "tp_all_gather"), 0);
  std::printf("tp2 GPT-MoE: tp all-reduce payload %.0f B/step, of which experts %.0f\n",
              Get(*multi, "tp_all_reduce_payload"), experts);
}

// Recompute of the MoE layers themselves under sp: the recompute wrapper
// goes inside the sequence gather (the MoE layer is its swappable child),
// so the replay routes the gathered sequence again.
TEST(ExpertTpParityTest, Sp2RecomputingMoeLayersMatchesOneProcess) {
  GptJob job = Job(/*moe_every=*/2);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy("sp,recompute");
  p->set_strategy_options("recompute_policy=modules,recompute_modules=MoeLayer");
  p->set_tp(2);
  auto multi = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(multi.ok()) << multi.status();
  Check(*single, *multi, "sp2 recomputing MoeLayer");
}

// ep2 x tp2 or ep2 x sp2 (`strategy`) on 4 ranks and one process: 2
// data-parallel ranks (the ep group), each a tp pair; the reference routes
// its batch of 8 as the 2 groups the data-parallel ranks get.
struct Ep2Runs {
  GptJob job;
  testing::ParityRun single, multi;
};

absl::StatusOr<Ep2Runs> RunEp2(const std::string& strategy, int steps = 20) {
  Ep2Runs r{.job = Job(/*moe_every=*/1)};
  r.job.mutable_train()->set_steps(steps);
  r.job.mutable_model()->set_moe_routing_groups(2);
  WEFT_ASSIGN_OR_RETURN(r.single, testing::RunSingleProcess(r.job));
  r.job.mutable_model()->set_moe_routing_groups(1);
  r.job.mutable_train()->set_micro_batch(4);
  ParallelConfig* p = r.job.mutable_train()->mutable_parallel();
  p->set_strategy(strategy);
  p->set_tp(2);
  p->set_ep(2);
  WEFT_ASSIGN_OR_RETURN(r.multi, testing::RunMultiProcess(r.job, 4));
  return r;
}

TEST(ExpertTpParityTest, Ep2Tp2MatchesOneProcess) {
  absl::StatusOr<Ep2Runs> runs = RunEp2("tp");
  ASSERT_TRUE(runs.ok()) << runs.status();
  const GptJob& job = runs->job;
  const testing::ParityRun *single = &runs->single, *multi = &runs->multi;
  Check(*single, *multi, "ep2 x tp2");
  // ep: each tp rank exchanges its ep peers' rows as under ep alone (both
  // tp ranks of a pair send the same rows: the tokens are whole on each):
  // tokens x top_k x C x 2 x 4 bytes of own rows per layer, plus the rows
  // its experts computed coming back.
  const double tokens = job.train().micro_batch() * kSeqLen;
  const double own = tokens * kTopK * kChannels * 2 * 4 * kLayers;
  const double own_mb = testing::MeanOverSteps(*multi, "ep_a2a_own_mb");
  const double expert_mb = testing::MeanOverSteps(*multi, "ep_a2a_expert_mb");
  EXPECT_NEAR(own_mb, own / 1e6, 1e-9);
  EXPECT_NEAR(testing::MeanOverSteps(*multi, "ep_a2a_payload_mb"), own_mb + expert_mb, 1e-9);
  EXPECT_GT(expert_mb, 0);
  // tp: the dense regions and the loss as for a GPT without dense MLPs,
  // plus the experts' partial sums, exactly the expert-side row bytes.
  EXPECT_NEAR(Get(*multi, "tp_all_reduce_payload"),
              DenseAndLossBytes(job, /*dense_layers=*/0) + expert_mb * 1e6, 1e-3);
  std::printf("ep2 x tp2: ep a2a own %.0f + expert %.0f B/step, tp all-reduce %.0f B/step\n",
              own_mb * 1e6, expert_mb * 1e6, Get(*multi, "tp_all_reduce_payload"));
}

// sp2 on a GPT-MoE (block 0 dense, block 1 MoE). sp's traffic per step
// (micro-batch of B x T tokens, S = 4 B T C bytes, L layers of which D
// dense, one micro-batch):
//   all-gather      forward: qkv per layer, fc per dense layer, the MoE
//                   layer's input per MoE layer, the head; backward: the
//                   same count (the reduce-scatters' backwards, and the
//                   MoE layer's output gradient): 2 (2 L + 1) S
//   reduce-scatter  forward: attn.proj per layer, mlp.proj per dense
//                   layer, the embedding; backward the same:
//                   2 (L + D + 1) S
//   all-reduce      cross-entropy 12 B T, each layer norm's (weight,
//                   bias) gradient 8 C (2 L + 1 norms), and the experts'
//                   partial sums as under tp (2 x 4 C per routed row).
TEST(ExpertTpParityTest, Sp2OnGptMoeMatchesOneProcess) {
  GptJob job = Job(/*moe_every=*/2);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  job.mutable_train()->mutable_parallel()->set_strategy("sp");
  job.mutable_train()->mutable_parallel()->set_tp(2);
  auto multi = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(multi.ok()) << multi.status();
  Check(*single, *multi, "sp2 GPT-MoE");
  const double b = job.train().micro_batch(), t = kSeqLen, dense = 1;
  const double s = 4 * b * t * kChannels;
  const double experts = 2.0 * b * t * kTopK * kChannels * 4 * /*MoE layers*/ 1;
  const double norms = (2 * kLayers + 1) * 8.0 * kChannels;
  EXPECT_DOUBLE_EQ(Get(*multi, "tp_all_gather_payload"), 2 * (2 * kLayers + 1) * s);
  EXPECT_DOUBLE_EQ(Get(*multi, "tp_reduce_scatter_payload"), 2 * (kLayers + dense + 1) * s);
  EXPECT_DOUBLE_EQ(Get(*multi, "tp_all_reduce_payload"), 12 * b * t + norms + experts);
  std::printf("sp2 GPT-MoE: tp all-gather %.0f, reduce-scatter %.0f, all-reduce %.0f B/step\n",
              Get(*multi, "tp_all_gather_payload"), Get(*multi, "tp_reduce_scatter_payload"),
              Get(*multi, "tp_all_reduce_payload"));
}

// The gathered sequences are routed and exchanged with the ep peers as
// under ep2 x tp2.
TEST(ExpertTpParityTest, Ep2Sp2MatchesOneProcess) {
  absl::StatusOr<Ep2Runs> runs = RunEp2("sp");
  ASSERT_TRUE(runs.ok()) << runs.status();
  const GptJob& job = runs->job;
  const testing::ParityRun *single = &runs->single, *multi = &runs->multi;
  Check(*single, *multi, "ep2 x sp2");
  const double tokens = job.train().micro_batch() * kSeqLen;
  EXPECT_NEAR(testing::MeanOverSteps(*multi, "ep_a2a_own_mb"),
              tokens * kTopK * kChannels * 2 * 4 * kLayers / 1e6, 1e-9);
}

// fsdp over the ep group (dp_shard = 2) with tp or sp pairs: the
// clipping norm sums the tp halves over tp on every rank. fsdp used to
// rebuild it from its own tp half only, so the tp ranks of a pair clipped
// with different norms, their replicated routers drifted apart, and by
// step 5 they routed differently (a gloo size mismatch in the exchange).
TEST(ExpertTpParityTest, Ep2Tp2Fsdp2MatchesOneProcess) {
  for (const char* strategy : {"tp,fsdp", "sp,fsdp"}) {
    absl::StatusOr<Ep2Runs> runs = RunEp2(strategy, /*steps=*/6);
    ASSERT_TRUE(runs.ok()) << strategy << ": " << runs.status();
    Check(runs->single, runs->multi, std::string("ep2 x ") + strategy);
  }
}

absl::Status RunExpectingError(GptJob job, int world) {
  job.mutable_train()->set_steps(2);
  auto r = testing::RunMultiProcess(job, world);
  return r.ok() ? absl::OkStatus() : r.status();
}

TEST(ExpertTpErrorsTest, RefusedCombinations) {
  GptJob job = Job(/*moe_every=*/1);
  job.mutable_train()->set_micro_batch(4);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_tp(2);
  // An expert hidden size tp does not divide (33 units over tp=2).
  p->set_strategy("tp");
  job.mutable_train()->set_micro_batch(8);
  job.mutable_model()->set_expert_mlp_ratio(33.0f / kChannels);
  absl::Status s = RunExpectingError(job, 2);
  EXPECT_NE(s.message().find("33 hidden units, not divisible by tp=2"), std::string::npos) << s;
}

}  // namespace
}  // namespace weft
