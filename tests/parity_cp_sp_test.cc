// Context parallelism composed with sequence parallelism vs one process:
// the same loss and gradient norm at every step and the same parameters and
// optimizer state after 20 steps at seq_len 256, for cp2 x sp2 (4 ranks),
// with dropout 0.1, with fsdp over 2 more (8 ranks) or a pipeline of 2
// stages (8 ranks; 1f1b, ZB-H1 and interleaved), and for cp4 x sp2. Each rank holds its zigzag chunks (T/cp tokens) and,
// outside the tp regions, its sp block of them (T/(cp tp) tokens): the
// column-parallel qkv gathers the chunks whole for ring attention and the
// row-parallel proj scatters them back. The tp group's traffic per step
// must be sp's formula over the rank's T/cp tokens, and the ring's the cp
// formula over its tp heads' K/V.
#include <cmath>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

// Summation order only (split GEMMs, ring log-sum-exp merge, sums over
// tp, cp and dp).
constexpr double kLossRtol = 1e-4;
constexpr double kParamTol = 1e-3;
constexpr int kSeqLen = 256;
constexpr int kTp = 2;

GptJob CpSpJob() {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  job.mutable_train()->set_seq_len(kSeqLen);
  job.mutable_train()->set_global_batch(2);
  job.mutable_train()->set_micro_batch(1);
  job.mutable_model()->set_max_seq_len(kSeqLen);
  return job;
}

struct CpSpCase {
  std::string label;
  float dropout = 0;
  std::string strategy = "sp";  // "sp,fsdp" with dp_shard=2, "sp,recompute"
  int dp_shard = 1;
  int pp = 1;
  std::string schedule = "1f1b";  // pp_schedule
  int chunks = 1;        // pp_virtual_stages
  int cp = 2;
  bool recompute() const { return strategy.find("recompute") != std::string::npos; }
};

// What rank 0 (pipeline stage 0 under pp) holds: blocks, layer norms,
// and whether the embedding and the head.
struct StageParts {
  int layers, norms;
  bool embed, head;
};

// sp's traffic on the tp group per step (the harness averages the whole
// run, evaluation included, over the steps), for micro-batches of
// B x T_local tokens, T_local = seq_len / cp, each tensor (B, T_local, C)
// f32. A forward all-gathers entering each column region (qkv and fc per
// layer, the head) and reduce-scatters leaving each row region (attn and
// mlp projections per layer, the embedding); its backward does the
// opposite on the same tensors; recompute replays the blocks' forwards.
// The all-reduces are the cross-entropy's (row max; sum-exp with the
// target logit: 3 B T_local floats per forward) and, in backward only, one
// per layer norm (weight and bias, 2C).
void ExpectSpTraffic(const testing::ParityRun& run, const GptJob& job, const StageParts& s,
                     int cp, int micro_batches, bool recompute, int eval_batches) {
  const double bytes = 4.0 * job.train().micro_batch() * (kSeqLen / cp) * job.model().d_model();
  const double gathers = 2 * s.layers + (s.head ? 1 : 0);  // per forward
  const double scatters = 2 * s.layers + (s.embed ? 1 : 0);
  const double replays = recompute ? 2 * s.layers : 0;
  const double evals = static_cast<double>(eval_batches) / job.train().steps();
  const double all_gather =
      bytes * (micro_batches * (gathers + scatters + replays) + evals * gathers);
  const double reduce_scatter =
      bytes * (micro_batches * (scatters + gathers + replays) + evals * scatters);
  const double ce =
      s.head ? (micro_batches + evals) * 4.0 * 3 * job.train().micro_batch() * (kSeqLen / cp)
             : 0;
  const double ln = micro_batches * s.norms * 2 * job.model().d_model() * 4.0;
  auto get = [&run](const std::string& k) {
    auto it = run.comm.find(k);
    return it == run.comm.end() ? 0.0 : it->second;
  };
  EXPECT_DOUBLE_EQ(get("tp_all_gather_payload"), all_gather);
  EXPECT_DOUBLE_EQ(get("tp_reduce_scatter_payload"), reduce_scatter);
  EXPECT_DOUBLE_EQ(get("tp_all_gather"), (kTp - 1.0) / kTp * all_gather);
  EXPECT_DOUBLE_EQ(get("tp_all_reduce_payload"), ce + ln);
  std::printf("tp all-gather payload %.1f B/step (formula %.1f), reduce-scatter %.1f (%.1f), "
              "all-reduce %.1f (%.1f)\n",
              get("tp_all_gather_payload"), all_gather, get("tp_reduce_scatter_payload"),
              reduce_scatter, get("tp_all_reduce_payload"), ce + ln);
}

class ContextSequenceParallelParityTest : public ::testing::TestWithParam<CpSpCase> {};

TEST_P(ContextSequenceParallelParityTest, MatchesOneProcess) {
  const CpSpCase& c = GetParam();
  GptJob job = CpSpJob();
  job.mutable_train()->set_global_batch(2 * c.dp_shard);
  job.mutable_model()->set_dropout(c.dropout);
  // Validation batches are the data-parallel rank's: only a dp-free run
  // evaluates the samples one process does.
  const testing::RunOptions options{.eval_batches = c.dp_shard == 1 ? 2 : 0};
  auto single = testing::RunSingleProcess(job, options);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_cp(c.cp);
  p->set_tp(kTp);
  p->set_dp_shard(c.dp_shard);
  p->set_pp(c.pp);
  p->set_pp_schedule(c.schedule);
  p->set_pp_virtual_stages(c.chunks);
  p->set_strategy(c.strategy);
  auto multi = testing::RunMultiProcess(job, c.cp * kTp * c.dp_shard * c.pp, options);
  ASSERT_TRUE(multi.ok()) << c.label << ": " << multi.status();
  testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, c.label);
  testing::ExpectGradNormsMatch(*single, *multi, kLossRtol, c.label);
  if (c.dp_shard == 1) {
    ASSERT_TRUE(single->val_loss.has_value() && multi->val_loss.has_value()) << c.label;
    EXPECT_NEAR(*multi->val_loss, *single->val_loss, kLossRtol * *single->val_loss) << c.label;
  }

  // Two micro-batches per rank (global batch 2 per data-parallel rank).
  const int micro_batches = 2;
  // Rank 0 is pipeline stage 0: the embedding and (of the 4 stages: embed,
  // 2 blocks, head) one block with its 2 norms; without pp all of them.
  const int n_layer = job.model().n_layer();
  const StageParts parts = c.pp > 1 ? StageParts{1, 2, true, false}
                                    : StageParts{n_layer, 2 * n_layer + 1, true, true};
  const int layers = parts.layers;
  ExpectSpTraffic(*multi, job, parts, c.cp, micro_batches, c.recompute(), options.eval_batches);
  // The ring carries this tp rank's heads' K/V of the chunks: blocks of
  // (1, seq_len / cp, 2 d_model / tp) f32, 2 (3 cp - 2) per layer and
  // micro-batch, sent plus received; a replayed forward 2 (cp - 1) more.
  const double block = 4.0 * (kSeqLen / c.cp) * 2 * job.model().d_model() / kTp;
  const double ring =
      layers * micro_batches * 2 * block * (3 * c.cp - 2 + (c.recompute() ? c.cp - 1 : 0));
  ASSERT_FALSE(std::isnan(testing::LastStep(*multi, "cp_ring_mb"))) << c.label;
  EXPECT_DOUBLE_EQ(testing::LastStep(*multi, "cp_ring_mb") * (1 << 20), ring) << c.label;
  std::printf("%s: max loss rdiff %.2e, param diff %.2e, grad norm rdiff %.2e, val loss %.6f "
              "vs %.6f; ring %.0f B/step per rank (formula %.0f)\n",
              c.label.c_str(), testing::MaxLossRelDiff(*multi, *single),
              testing::MaxRelativeDifference(multi->params, single->params),
              testing::MaxGradNormRelDiff(*multi, *single), multi->val_loss.value_or(NAN),
              single->val_loss.value_or(NAN), testing::LastStep(*multi, "cp_ring_mb") * (1 << 20),
              ring);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ContextSequenceParallelParityTest,
    ::testing::Values(CpSpCase{"cp2_sp2"}, CpSpCase{"cp2_sp2_dropout", 0.1f},
                      // The replayed blocks gather, ring and draw the same masks again.
                      CpSpCase{"cp2_sp2_recompute_dropout", 0.1f, "sp,recompute"},
                      // Mesh [dp_shard=2, cp=2, tp=2]: fsdp flattens the tp pieces.
                      CpSpCase{"cp2_sp2_fsdp2_dropout", 0.1f, "sp,fsdp", 2},
                      // Mesh [pp=2, cp=2, tp=2]: the stages pass sp blocks of the chunks.
                      CpSpCase{"cp2_sp2_pp2", 0, "sp", 1, 2},
                      // The same with the schedules that split or interleave the
                      // stages: ZB-H1 (weight gradients apart) and 2 virtual stages.
                      CpSpCase{"cp2_sp2_pp2_zbh1", 0, "sp", 1, 2, "zbh1"},
                      CpSpCase{"cp2_sp2_pp2_interleaved", 0, "sp", 1, 2, "interleaved", 2},
                      // 8 zigzag chunks of 32 tokens, each rank's 64 split 2 ways.
                      CpSpCase{"cp4_sp2", 0, "sp", 1, 1, "1f1b", 1, 4}),
    [](const ::testing::TestParamInfo<CpSpCase>& i) { return i.param.label; });

// Sequence shards of the chunks: seq_len / cp tokens must split tp ways.
// 252 tokens split into 2 x cp chunks (and seq_len itself divides by tp),
// but each cp rank's 126 tokens do not split 4 ways.
TEST(ContextSequenceParallelErrorsTest, ChunksNotDivisibleByTp) {
  GptJob job = CpSpJob();
  job.mutable_train()->set_seq_len(252);
  job.mutable_train()->set_steps(1);
  job.mutable_model()->set_n_head(4);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_cp(2);
  p->set_tp(4);
  p->set_strategy("sp");
  auto run = testing::RunMultiProcess(job, 8);
  ASSERT_FALSE(run.ok());
  const std::string m(run.status().message());
  const size_t first = m.find("rank 0:");
  std::printf("%s\n", m.substr(first, m.find('\n', first) - first).c_str());
  EXPECT_NE(m.find("126 tokens"), std::string::npos) << m;
  EXPECT_NE(m.find("seq_len divisible by cp x tp = 8"), std::string::npos) << m;
  EXPECT_NE(m.find("use --seq_len=248 or 256"), std::string::npos) << m;
  // At startup, when sp is applied, not at the first forward.
  EXPECT_NE(m.find("applying strategy 'sp'"), std::string::npos) << m;
}

}  // namespace
}  // namespace weft
