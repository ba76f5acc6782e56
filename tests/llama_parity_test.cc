// The Llama model (RMSNorm, RoPE, SwiGLU, grouped-query attention) under
// every strategy that applies to it, against one process: the same matrix
// and tolerances as GPT's parity tests (loss rtol 1e-4 at every one of 20
// steps; parameters and optimizer state 1e-3). Nothing under strategies/
// knows the model: it ships its tensor-parallel plan and its stages. Under
// tp=4 its 2 K/V heads are each replicated on 2 ranks.
#include <map>
#include <string>

#include "core/base/check.h"
#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"
#include "tests/tiny_llama.h"

namespace weft {
namespace {

constexpr double kLossRtol = 1e-4;  // only f32 summation order differs
constexpr double kParamTol = 1e-3;

struct LlamaCase {
  std::string label;
  std::string strategy;
  int world = 2;
  int micro_batch = 4;
  int zero_stage = 1;
  int tp = 0;
  int pp = 0;
  std::string schedule = "1f1b";
  int chunks = 1;
  int dp_replicate = 0;
  int cp = 0;
  bool recompute = false;
  bool tied = false;
  bool qk_norm = false;  // Qwen3's per-head norms of q and k
};

testing::RunOptions LlamaRun(bool tied, bool qk_norm) {
  testing::RunOptions o;
  o.make_model = testing::LlamaModelFactory(testing::TinyLlamaConfig(tied, qk_norm), 16);
  return o;
}

GptJob Job(int micro_batch) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  job.mutable_train()->set_micro_batch(micro_batch);
  return job;
}

// One reference per variant (the whole batch of 8 in one micro-batch),
// shared by the cases of a test shard.
const testing::ParityRun& Reference(bool tied, bool qk_norm) {
  static auto* cache = new std::map<std::pair<bool, bool>, testing::ParityRun>();
  auto it = cache->find({tied, qk_norm});
  if (it == cache->end()) {
    auto run = testing::RunSingleProcess(Job(8), LlamaRun(tied, qk_norm));
    WEFT_CHECK_OK(run.status());
    // The harness trained the Llama, not the job's GPT.
    WEFT_CHECK(run->params.count("blocks.0.attn.k.weight") == 1) << "no Llama parameters";
    it = cache->emplace(std::make_pair(tied, qk_norm), *run).first;
  }
  return it->second;
}

class LlamaParityTest : public ::testing::TestWithParam<LlamaCase> {};

TEST_P(LlamaParityTest, MatchesOneProcess) {
  const LlamaCase& c = GetParam();
  GptJob job = Job(c.micro_batch);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy(c.strategy);
  p->set_zero_stage(c.zero_stage);
  if (c.tp > 0) p->set_tp(c.tp);
  if (c.pp > 0) {
    p->set_pp(c.pp);
    p->set_pp_schedule(c.schedule);
    p->set_pp_virtual_stages(c.chunks);
    p->set_pp_split("layers");
  }
  if (c.dp_replicate > 0) {
    p->set_dp_replicate(c.dp_replicate);
    p->set_dp_shard(c.world / c.dp_replicate);
  }
  if (c.cp > 0) p->set_cp(c.cp);
  job.mutable_train()->set_recompute(c.recompute);
  auto multi = testing::RunMultiProcess(job, c.world, LlamaRun(c.tied, c.qk_norm));
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(Reference(c.tied, c.qk_norm), *multi, kLossRtol, kParamTol, c.label);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, LlamaParityTest,
    ::testing::Values(
        LlamaCase{.label = "ddp2", .strategy = "ddp"},
        LlamaCase{.label = "zero1", .strategy = "zero", .zero_stage = 1},
        LlamaCase{.label = "zero2", .strategy = "zero", .zero_stage = 2},
        LlamaCase{.label = "zero3", .strategy = "zero", .zero_stage = 3},
        LlamaCase{.label = "fsdp2", .strategy = "fsdp"},
        LlamaCase{.label = "fsdp4", .strategy = "fsdp", .world = 4, .micro_batch = 2},
        LlamaCase{.label = "hsdp2x2", .strategy = "fsdp", .world = 4, .micro_batch = 2,
                  .dp_replicate = 2},
        LlamaCase{.label = "fsdp2_recompute", .strategy = "fsdp", .recompute = true},
        // K/V heads split over tp: 2 K/V heads and 4 query heads over 2 ranks.
        LlamaCase{.label = "tp2", .strategy = "tp", .micro_batch = 8, .tp = 2},
        LlamaCase{.label = "sp2", .strategy = "sp", .micro_batch = 8, .tp = 2},
        // 2 K/V heads over tp=4: each replicated on the two ranks of its
        // query heads, their gradients summed (also under fsdp's shards).
        LlamaCase{.label = "tp4_kv_replicated", .strategy = "tp", .world = 4, .micro_batch = 8,
                  .tp = 4},
        LlamaCase{.label = "sp4_qk_norm_kv_replicated", .strategy = "sp", .world = 4,
                  .micro_batch = 8, .tp = 4, .qk_norm = true},
        LlamaCase{.label = "tp4_fsdp2_kv_replicated", .strategy = "tp,fsdp", .world = 8,
                  .micro_batch = 4, .tp = 4},
        // QK-norm's weights see each rank's heads: their gradients sum over tp.
        LlamaCase{.label = "tp2_qk_norm", .strategy = "tp", .micro_batch = 8, .tp = 2,
                  .qk_norm = true},
        LlamaCase{.label = "sp2_fsdp2_qk_norm", .strategy = "sp,fsdp", .world = 4,
                  .micro_batch = 4, .tp = 2, .qk_norm = true},
        LlamaCase{.label = "gpipe_pp2", .strategy = "", .micro_batch = 2, .pp = 2,
                  .schedule = "gpipe"},
        LlamaCase{.label = "onef1b_pp2_tied", .strategy = "", .micro_batch = 2, .pp = 2,
                  .schedule = "1f1b", .tied = true},
        LlamaCase{.label = "interleaved_pp2_v2", .strategy = "", .micro_batch = 2, .pp = 2,
                  .schedule = "interleaved", .chunks = 2},
        LlamaCase{.label = "zbh1_pp2", .strategy = "", .micro_batch = 2, .pp = 2,
                  .schedule = "zbh1"},
        // Ring attention over zigzag chunks; RoPE at the chunks' global positions.
        LlamaCase{.label = "cp2", .strategy = "", .micro_batch = 8, .cp = 2},
        LlamaCase{.label = "cp2_fsdp2", .strategy = "fsdp", .world = 4, .micro_batch = 4,
                  .cp = 2},
        LlamaCase{.label = "cp2_sp2", .strategy = "sp", .world = 4, .micro_batch = 8, .tp = 2,
                  .cp = 2},
        // 3D on 8 ranks: pp2 x fsdp2 x tp2.
        LlamaCase{.label = "pp2_fsdp2_tp2", .strategy = "tp,fsdp", .world = 8, .micro_batch = 2,
                  .tp = 2, .pp = 2}),
    [](const ::testing::TestParamInfo<LlamaCase>& i) { return i.param.label; });

// K/V heads neither divided by tp nor dividing it: refused, naming the field.
TEST(LlamaTpErrorsTest, KvHeadsNeitherDividingNorMultipleOfTp) {
  LlamaConfig c = testing::TinyLlamaConfig();
  c.set_n_head(6);
  c.set_n_kv_head(2);
  c.set_head_dim(8);
  testing::RunOptions o;
  o.make_model = testing::LlamaModelFactory(c, 16);
  GptJob job = Job(8);
  job.mutable_train()->set_steps(1);
  job.mutable_train()->mutable_parallel()->set_strategy("tp");
  job.mutable_train()->mutable_parallel()->set_tp(3);
  auto r = testing::RunMultiProcess(job, 3, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'blocks.*.attn.k' has 2 heads for tp=3"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("multiple of n_kv_head=2"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace weft
