// Pipeline parallelism vs one process: the same loss at every step and the
// same parameters and optimizer state after 20 steps, for GPipe and 1F1B on
// 2 and 4 pipeline ranks (splitting by layers and by parameters), ZB-H1
// (backward split into B and W) on 2 and 4, the
// interleaved schedule with 2 chunks per rank (also x fsdp2 and zero-3
// over 2), and pp2 x {ddp2, fsdp2, zero-1, zero-2, zero-3 over 2}. The tied
// embedding and head live on the first and last rank; the reassembled
// state checks that their copies stayed identical.
#include <cstdio>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

// The tied weight's two gradient halves are summed in another order than
// one process's accumulation: f32 rounding only.
constexpr double kLossRtol = 1e-4;
constexpr double kParamTol = 1e-3;

struct PpCase {
  std::string label;
  int pp;
  std::string schedule;
  int chunks = 1;
  std::string split = "params";
  std::string dp_strategy;  // "" or a data-parallel strategy over 2 ranks
  int zero_stage = 1;
  int micro_batch = 2;  // 4 micro-batches per step (2 with dp2); 1: 8 (4)
  int tp = 1;           // with "tp" (or "sp") in dp_strategy
  int vocab_pad_multiple = 8;  // 1: the corpus's 41 tokens, which tp=2 pads
};

class PipelineParityTest : public ::testing::TestWithParam<PpCase> {};

TEST_P(PipelineParityTest, MatchesOneProcess) {
  const PpCase& c = GetParam();
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  job.mutable_train()->set_micro_batch(c.micro_batch);
  job.mutable_model()->set_vocab_pad_multiple(c.vocab_pad_multiple);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_pp(c.pp);
  p->set_pp_schedule(c.schedule);
  p->set_pp_virtual_stages(c.chunks);
  p->set_pp_split(c.split);
  p->set_strategy(c.dp_strategy);
  p->set_zero_stage(c.zero_stage);
  p->set_tp(c.tp);
  const bool has_dp = c.dp_strategy.find("ddp") != std::string::npos ||
                      c.dp_strategy.find("fsdp") != std::string::npos ||
                      c.dp_strategy.find("zero") != std::string::npos;
  const int world = c.pp * (has_dp ? 2 : 1) * c.tp;
  auto multi = testing::RunMultiProcess(job, world);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, c.label);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, PipelineParityTest,
    ::testing::Values(PpCase{"gpipe_pp2", 2, "gpipe"}, PpCase{"onef1b_pp2", 2, "1f1b"},
                      PpCase{"gpipe_pp4", 4, "gpipe", 1, "layers"},
                      PpCase{"onef1b_pp4", 4, "1f1b", 1, "layers"},
                      PpCase{"interleaved_pp2_v2", 2, "interleaved", 2, "layers"},
                      PpCase{"zbh1_pp2", 2, "zbh1"},
                      PpCase{"onef1b_pp2_time", 2, "1f1b", 1, "time"},
                      PpCase{"zbh1_pp4", 4, "zbh1", 1, "layers"},
                      PpCase{"onef1b_pp2_ddp2", 2, "1f1b", 1, "params", "ddp"},
                      // W's queued gradients-ready hooks feed ddp's buckets.
                      PpCase{"zbh1_pp2_ddp2", 2, "zbh1", 1, "params", "ddp"},
                      PpCase{"zbh1_pp2_zero1", 2, "zbh1", 1, "params", "zero", 1},
                      PpCase{"onef1b_pp2_fsdp2", 2, "1f1b", 1, "params", "fsdp"},
                      PpCase{"gpipe_pp2_zero1", 2, "gpipe", 1, "params", "zero", 1},
                      PpCase{"onef1b_pp2_zero2", 2, "1f1b", 1, "params", "zero", 2},
                      PpCase{"onef1b_pp2_zero3", 2, "1f1b", 1, "params", "zero", 3},
                      // Two chunks per rank: fsdp prefetched the other chunk's
                      // unit after its last backward, so step 2 ran on
                      // step 1's gathered weights (RunContext::stage_range).
                      PpCase{"interleaved_pp2_v2_fsdp2", 2, "interleaved", 2, "layers", "fsdp"},
                      PpCase{"interleaved_pp2_v2_zero3", 2, "interleaved", 2, "layers", "zero", 3},
                      // More micro-batches in flight than the loader's ring has slots.
                      PpCase{"gpipe_pp2_m8", 2, "gpipe", 1, "params", "", 1, 1},
                      PpCase{"onef1b_pp2_tp2", 2, "1f1b", 1, "params", "tp", 1, 2, 2},
                      // tp's layers queue their weight gradients for W too.
                      PpCase{"zbh1_pp2_tp2", 2, "zbh1", 1, "params", "tp", 1, 2, 2},
                      // The tied table on both stages, padded by tp (41 rows).
                      PpCase{"onef1b_pp2_tp2_vocab41", 2, "1f1b", 1, "params", "tp", 1, 2, 2, 1},
                      // Full 3D on 8 ranks: pp2 x dp2 x tp2.
                      PpCase{"onef1b_pp2_ddp2_tp2", 2, "1f1b", 1, "params", "tp,ddp", 1, 2, 2},
                      PpCase{"onef1b_pp2_fsdp2_sp2", 2, "1f1b", 1, "params", "sp,fsdp", 1, 2, 2}),
    [](const ::testing::TestParamInfo<PpCase>& i) { return i.param.label; });

// fsdp's root units (the embedding on rank 0) are gathered and reduced by
// the chunks that use them only: with two chunks a rank, the root's hooks
// wrap both, and the other chunk's backward reduce-scattered them again
// (zeros). Rank 0 holds the embedding and one block under either schedule,
// so both reduce and gather as many units per micro-batch.
TEST(PipelineFsdp, InterleavedReducesEachUnitOncePerMicroBatch) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(3);
  job.mutable_train()->set_micro_batch(2);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_pp(2);
  p->set_pp_split("layers");
  p->set_strategy("fsdp");
  auto one_f_one_b = testing::RunMultiProcess(job, 4);
  ASSERT_TRUE(one_f_one_b.ok()) << one_f_one_b.status();
  p->set_pp_schedule("interleaved");
  p->set_pp_virtual_stages(2);
  auto interleaved = testing::RunMultiProcess(job, 4);
  ASSERT_TRUE(interleaved.ok()) << interleaved.status();
  for (const char* op : {"reduce_scatter_calls", "all_gather_calls"}) {
    EXPECT_EQ(interleaved->comm[op], one_f_one_b->comm[op]) << op;
    EXPECT_GT(one_f_one_b->comm[op], 0) << op;
  }
}

// A GPT-MoE (every block's MLP a top-2 mixture of 4 experts, balance loss
// on) through a 2-stage pipeline: the auxiliary loss's gradient is scaled
// like the main loss's, as in one process.
TEST(PipelineMoe, MatchesOneProcess) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  job.mutable_train()->set_micro_batch(2);
  job.mutable_model()->set_moe_every(1);
  job.mutable_model()->set_num_experts(4);
  job.mutable_model()->set_top_k(2);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  job.mutable_train()->mutable_parallel()->set_pp(2);
  // zbh1: the experts' weight gradients wait for W like the Linears'.
  for (const char* schedule : {"1f1b", "zbh1"}) {
    job.mutable_train()->mutable_parallel()->set_pp_schedule(schedule);
    auto multi = testing::RunMultiProcess(job, 2);
    ASSERT_TRUE(multi.ok()) << multi.status();
    testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, std::string("moe_pp2_") + schedule);
  }
}

// --pp=0 takes the ranks the other axes leave (here 4 / dp_shard 2 = 2)
// and, like --pp=2, implies the pipeline strategy: the same run bitwise.
TEST(PipelineMeshSize, ZeroTakesTheRemainingRanks) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(4);
  job.mutable_train()->set_micro_batch(2);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy("fsdp");
  p->set_dp_shard(2);
  p->set_pp(2);
  auto explicit_pp = testing::RunMultiProcess(job, 4);
  ASSERT_TRUE(explicit_pp.ok()) << explicit_pp.status();
  p->set_pp(0);
  auto remaining = testing::RunMultiProcess(job, 4);
  ASSERT_TRUE(remaining.ok()) << remaining.status();
  testing::ExpectParity(*explicit_pp, *remaining, 0, 0, "pp=0 vs pp=2");
}

// --pp=0 alone: dp_shard, left at its default "the rest" too, is one rank
// wide, so the pipeline takes every rank (two axes of 0 were an error, and
// the ranks disagreed on the message).
TEST(PipelineMeshSize, ZeroAloneTakesEveryRank) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(3);
  job.mutable_train()->set_micro_batch(4);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_pp(2);
  auto explicit_pp = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(explicit_pp.ok()) << explicit_pp.status();
  p->set_pp(0);
  auto remaining = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(remaining.ok()) << remaining.status();
  testing::ExpectParity(*explicit_pp, *remaining, 0, 0, "pp=0 alone vs pp=2");
}

// The first stage holds the most activations: 1F1B at most `pp` micro-
// batches, GPipe all of them; the activation store's bytes follow.
TEST(PipelineMemory, OneFOneBHoldsAtMostStagesMicroBatches) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(2);
  job.mutable_train()->set_micro_batch(1);  // 8 micro-batches per step
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_pp(2);
  std::map<std::string, testing::ParityRun> runs;
  for (const std::string schedule : {"gpipe", "1f1b"}) {
    p->set_pp_schedule(schedule);
    auto run = testing::RunMultiProcess(job, 2);
    ASSERT_TRUE(run.ok()) << run.status();
    runs[schedule] = *run;
  }
  EXPECT_EQ(testing::MaxOverSteps(runs["gpipe"], "pp_in_flight"), 8);
  EXPECT_EQ(testing::MaxOverSteps(runs["1f1b"], "pp_in_flight"), 2);
  const double gpipe_mb = testing::MaxOverSteps(runs["gpipe"], "pp_activation_mb");
  const double onef1b_mb = testing::MaxOverSteps(runs["1f1b"], "pp_activation_mb");
  std::printf("first stage's peak activations: gpipe %.3f MB, 1f1b %.3f MB\n", gpipe_mb, onef1b_mb);
  EXPECT_NEAR(gpipe_mb / onef1b_mb, 4.0, 0.05);
}

// recompute is applied after pp split the model into stages, and wraps the
// blocks the stages list: the pipeline must run the wrappers. It used to
// keep the unwrapped blocks it split, so --recompute under --pp trained
// the same numbers while silently saving every activation.
TEST(PipelineMemory, RecomputeWrappedBlocksRunUnderPp) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(4);
  job.mutable_train()->set_micro_batch(2);
  job.mutable_model()->set_dropout(0.1f);  // the replay must draw the same masks
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_pp(2);
  auto plain = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(plain.ok()) << plain.status();
  job.mutable_train()->set_recompute(true);
  auto recompute = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(recompute.ok()) << recompute.status();
  testing::ExpectParity(*plain, *recompute, 0, 0, "pp2 with --recompute");
  const double plain_mb = testing::MaxOverSteps(*plain, "pp_activation_mb");
  const double recompute_mb = testing::MaxOverSteps(*recompute, "pp_activation_mb");
  std::printf("first stage's peak activations: %.3f MB, with recompute %.3f MB\n", plain_mb,
              recompute_mb);
  EXPECT_LT(recompute_mb, 0.5 * plain_mb);
}

}  // namespace
}  // namespace weft
