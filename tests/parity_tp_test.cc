// Tensor (tp) and sequence (sp) parallelism on gloo ranks (processes) vs one
// process: the same loss at every step and the same parameters and
// optimizer state after 20 steps, alone and composed with fsdp and ddp on
// the mesh, with dropout, plus the tp group's traffic per step against the
// Megatron formulas.
#include <cstdio>

#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

// As for ddp: only the f32 summation order differs (split GEMMs, all-reduces).
constexpr double kLossRtol = 1e-4;
constexpr double kParamTol = 1e-3;

GptJob Job() {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  job.mutable_model()->set_n_head(4);  // whole heads on each of up to 4 ranks
  return job;
}

GptJob WithStrategy(GptJob job, const std::string& strategy, int tp) {
  job.mutable_train()->mutable_parallel()->set_strategy(strategy);
  job.mutable_train()->mutable_parallel()->set_tp(tp);
  return job;
}

// The tp group's traffic per step: per micro-batch of B x T tokens of
// width C, every layer leaves two row-parallel regions in forward (attn
// and mlp projections) and enters two column regions in backward (qkv and
// fc inputs); the embedding leaves one in forward, the head enters one in
// backward: (4L + 2) tensors of S = B T C floats. Without sp each is an
// all-reduce; with sp an all-gather plus a reduce-scatter. The
// cross-entropy adds an all-reduce of the row max (B T) and of the summed
// exponentials with the target logits (2 B T); sp adds the layer norms'
// weight and bias gradients (2 C per norm, 2L + 1 norms).
struct TpTraffic {
  double region_tensors, s_bytes, ce_bytes, ln_bytes;
};

TpTraffic Traffic(const GptJob& job, int micro_batches) {
  const double b = job.train().micro_batch(), t = job.train().seq_len();
  const double c = job.model().d_model(), l = job.model().n_layer();
  return {micro_batches * (4 * l + 2), 4 * b * t * c, micro_batches * 4 * 3 * b * t,
          micro_batches * (2 * l + 1) * 2 * c * 4};
}

void ExpectTpTraffic(const testing::ParityRun& run, const GptJob& job, int tp, bool sp,
                     int micro_batches) {
  const TpTraffic f = Traffic(job, micro_batches);
  const double ar = 2.0 * (tp - 1) / tp, half = (tp - 1.0) / tp;
  const double regions = f.region_tensors * f.s_bytes;
  auto get = [&run](const std::string& k) {
    auto it = run.comm.find(k);
    return it == run.comm.end() ? 0.0 : it->second;
  };
  if (!sp) {
    EXPECT_DOUBLE_EQ(get("tp_all_reduce_payload"), regions + f.ce_bytes);
    EXPECT_DOUBLE_EQ(get("tp_all_reduce"), ar * (regions + f.ce_bytes));
    EXPECT_EQ(get("tp_all_gather"), 0);
    EXPECT_EQ(get("tp_reduce_scatter"), 0);
  } else {
    EXPECT_DOUBLE_EQ(get("tp_all_gather_payload"), regions);
    EXPECT_DOUBLE_EQ(get("tp_reduce_scatter_payload"), regions);
    // sp's all-gather + reduce-scatter move what tp's all-reduce would.
    EXPECT_DOUBLE_EQ(get("tp_all_gather") + get("tp_reduce_scatter"), ar * regions);
    EXPECT_DOUBLE_EQ(get("tp_all_gather"), half * regions);
    EXPECT_DOUBLE_EQ(get("tp_all_reduce_payload"), f.ce_bytes + f.ln_bytes);
  }
}

TEST(TpParityTest, Tp2AndTp4MatchOneProcess) {
  GptJob job = Job();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  for (int tp : {2, 4}) {
    GptJob j = WithStrategy(job, "tp", tp);
    auto multi = testing::RunMultiProcess(j, tp);
    ASSERT_TRUE(multi.ok()) << multi.status();
    testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, "tp " + std::to_string(tp));
    ExpectTpTraffic(*multi, j, tp, /*sp=*/false, /*micro_batches=*/1);
    std::printf("tp=%d: tp all_reduce %.0f bus bytes/step (%.0f calls)\n", tp,
                multi->comm["tp_all_reduce"], multi->comm["tp_all_reduce_calls"]);
  }
}

TEST(TpParityTest, SequenceParallelMatchesOneProcess) {
  GptJob job = Job();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  GptJob j = WithStrategy(job, "sp", 2);
  auto multi = testing::RunMultiProcess(j, 2);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, "tp 2 + sp");
  ExpectTpTraffic(*multi, j, 2, /*sp=*/true, /*micro_batches=*/1);
}

TEST(TpParityTest, Tp2TimesFsdp2MatchesOneProcess) {
  GptJob job = Job();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  GptJob j = WithStrategy(job, "tp,fsdp", 2);
  j.mutable_train()->set_micro_batch(4);  // 2 data-parallel ranks x 4
  auto multi = testing::RunMultiProcess(j, 4);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, "tp 2 x fsdp 2");
  ExpectTpTraffic(*multi, j, 2, /*sp=*/false, /*micro_batches=*/1);
}

TEST(TpParityTest, SpTimesDdp2MatchesOneProcess) {
  GptJob job = Job();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  GptJob j = WithStrategy(job, "sp,ddp", 2);
  j.mutable_train()->set_micro_batch(2);  // 2 data-parallel ranks x 2 micro-batches of 2
  auto multi = testing::RunMultiProcess(j, 4);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, "tp 2 + sp x ddp 2");
  ExpectTpTraffic(*multi, j, 2, /*sp=*/true, /*micro_batches=*/2);
}

TEST(TpParityTest, DropoutMasksAreSlicesOfOneProcess) {
  GptJob job = Job();
  job.mutable_model()->set_dropout(0.1f);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  for (const char* strategy : {"tp", "sp"}) {
    auto multi = testing::RunMultiProcess(WithStrategy(job, strategy, 2), 2);
    ASSERT_TRUE(multi.ok()) << multi.status();
    testing::ExpectParity(*single, *multi, kLossRtol, kParamTol,
                          std::string(strategy) + " 2 with dropout 0.1");
  }
}

}  // namespace
}  // namespace weft
