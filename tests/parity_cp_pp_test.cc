// Context parallelism composed with pipeline parallelism vs one process: the
// same loss and gradient norm at every step, the same parameters and
// optimizer state after 20 steps at seq_len 256, and the same validation
// loss (evaluation runs through the pipeline on each cp rank's chunks), for
// cp2 x pp2 on 4 ranks with 1F1B, GPipe with dropout 0.1, interleaved
// virtual stages, ZB-H1 and a split by measured stage times, and
// dp2 x pp2 x cp2 (fsdp) and tp2 x pp2 x cp2 on 8 ranks. Stage 0 embeds this cp rank's chunks,
// the activations between stages are the chunks (a full-length one would
// fail ring attention's shape check), and each stage's ring carries the K/V
// of its own layers only. A checkpoint saved under cp2 x pp2 resumes in one
// process and the other way round. (cp x pp with MoE: tests/parity_cp_moe_test.)
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

// Summation order only: the log-sum-exp merge of ring blocks, gradients
// summed over cp, the tied weight's halves summed over pp.
constexpr double kLossRtol = 1e-4;
constexpr double kParamTol = 1e-3;
constexpr int kSeqLen = 256;
constexpr int kEvalBatches = 2;

GptJob CpPpJob(int global_batch) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  job.mutable_train()->set_seq_len(kSeqLen);
  job.mutable_train()->set_global_batch(global_batch);
  job.mutable_train()->set_micro_batch(1);
  job.mutable_model()->set_max_seq_len(kSeqLen);
  return job;
}

struct CpPpCase {
  std::string label;
  std::string schedule;
  int chunks = 1;             // pp_virtual_stages
  std::string split = "layers";
  float dropout = 0;
  int dp_shard = 1;           // with a data-parallel strategy in `strategy`
  std::string strategy;
  int tp = 1;                 // with "tp" in `strategy`
};

class ContextPipelineParityTest : public ::testing::TestWithParam<CpPpCase> {};

TEST_P(ContextPipelineParityTest, MatchesOneProcess) {
  const CpPpCase& c = GetParam();
  // Two micro-batches per pipeline (the least 1F1B and interleaved take).
  GptJob job = CpPpJob(2 * c.dp_shard);
  job.mutable_model()->set_dropout(c.dropout);
  // Validation batches are the data-parallel rank's: only a dp-free run
  // evaluates the samples one process does.
  const testing::RunOptions options{.eval_batches = c.dp_shard == 1 ? kEvalBatches : 0};
  auto single = testing::RunSingleProcess(job, options);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_cp(2);
  p->set_pp(2);
  p->set_pp_schedule(c.schedule);
  p->set_pp_virtual_stages(c.chunks);
  p->set_pp_split(c.split);
  p->set_dp_shard(c.dp_shard);
  p->set_strategy(c.strategy);
  p->set_tp(c.tp);
  auto multi = testing::RunMultiProcess(job, 4 * c.dp_shard * c.tp, options);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, kLossRtol, kParamTol, c.label);
  testing::ExpectGradNormsMatch(*single, *multi, kLossRtol, c.label);
  if (c.dp_shard == 1) {
    ASSERT_TRUE(single->val_loss.has_value() && multi->val_loss.has_value()) << c.label;
    EXPECT_NEAR(*multi->val_loss, *single->val_loss, kLossRtol * *single->val_loss) << c.label;
  }
  if (c.split == "layers") {
    // The 4 stages (embed, 2 blocks, head) split by count put one block on
    // pipeline rank 0 (with or without virtual stages): per micro-batch its
    // ring moves 2 x (3 cp - 2) blocks of (1, seq_len / cp, 2 d_model / tp)
    // f32.
    const double block = 4.0 * (kSeqLen / 2) * 2 * job.model().d_model() / c.tp;
    const double ring = 1 * 2 /*micro-batches*/ * 2 * block * (3 * 2 - 2);
    ASSERT_FALSE(std::isnan(testing::LastStep(*multi, "cp_ring_mb"))) << c.label;
    EXPECT_DOUBLE_EQ(testing::LastStep(*multi, "cp_ring_mb") * (1 << 20), ring) << c.label;
  }
  std::printf("%s: max loss rdiff %.2e, param diff %.2e, grad norm rdiff %.2e, val loss %.6f vs "
              "%.6f\n",
              c.label.c_str(), testing::MaxLossRelDiff(*multi, *single),
              testing::MaxRelativeDifference(multi->params, single->params),
              testing::MaxGradNormRelDiff(*multi, *single), multi->val_loss.value_or(NAN),
              single->val_loss.value_or(NAN));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ContextPipelineParityTest,
    ::testing::Values(CpPpCase{"cp2_pp2_1f1b", "1f1b"},
                      CpPpCase{"cp2_pp2_gpipe_dropout", "gpipe", 1, "layers", 0.1f},
                      CpPpCase{"cp2_pp2_interleaved_v2", "interleaved", 2},
                      CpPpCase{"cp2_pp2_zbh1", "zbh1"},
                      // Stage times probed on each cp rank's chunks.
                      CpPpCase{"cp2_pp2_time", "1f1b", 1, "time"},
                      // 4D-style on 8 ranks: mesh [pp=2, dp_shard=2, cp=2].
                      CpPpCase{"dp2_pp2_cp2_fsdp", "1f1b", 1, "layers", 0, 2, "fsdp"},
                      // Mesh [pp=2, cp=2, tp=2]: each ring carries its tp heads' K/V.
                      CpPpCase{"tp2_pp2_cp2", "1f1b", 1, "layers", 0, 1, "tp", 2}),
    [](const ::testing::TestParamInfo<CpPpCase>& i) { return i.param.label; });

// Checkpoints across both axes: cp2 x pp2 saves after 10 of 20 steps (each
// pipeline stage's pieces, once per cp pair: the cp ranks are copies of one
// replica) and one process resumes; then the other way round. Both match
// the straight one-process run.
TEST(ContextPipelineCheckpointTest, ReshardsToAndFromOneProcess) {
  GptJob job = CpPpJob(2);
  job.mutable_model()->set_dropout(0.1f);
  auto straight = testing::RunSingleProcess(job);
  ASSERT_TRUE(straight.ok()) << straight.status();
  GptJob split = job;
  ParallelConfig* p = split.mutable_train()->mutable_parallel();
  p->set_cp(2);
  p->set_pp(2);
  for (const bool split_first : {true, false}) {
    const std::string label = split_first ? "cp2 x pp2 -> one process" : "one process -> cp2 x pp2";
    const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/cp_pp_", split_first);
    std::filesystem::remove_all(dir);
    job.mutable_train()->set_checkpoint_dir(dir);
    split.mutable_train()->set_checkpoint_dir(dir);
    const testing::RunOptions save{.steps = 10, .save_at_end = true};
    auto first = split_first ? testing::RunMultiProcess(split, 4, save)
                             : testing::RunSingleProcess(job, save);
    ASSERT_TRUE(first.ok()) << label << ": " << first.status();
    GptJob resume_single = job, resume_split = split;
    resume_single.mutable_train()->set_resume("latest");
    resume_split.mutable_train()->set_resume("latest");
    auto second = split_first ? testing::RunSingleProcess(resume_single)
                              : testing::RunMultiProcess(resume_split, 4);
    ASSERT_TRUE(second.ok()) << label << ": " << second.status();
    testing::ParityRun joined = *second;
    joined.losses.insert(joined.losses.begin(), first->losses.begin(), first->losses.end());
    testing::ExpectParity(*straight, joined, kLossRtol, kParamTol, label);
    std::printf("%s: max loss rdiff %.2e, param diff %.2e\n", label.c_str(),
                testing::MaxLossRelDiff(joined, *straight),
                testing::MaxRelativeDifference(joined.params, straight->params));
  }
}

}  // namespace
}  // namespace weft
