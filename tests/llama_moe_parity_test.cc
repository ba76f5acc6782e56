// The Llama mixture-of-experts variant (SwiGLU experts; Mixtral's router,
// sigmoid scores with a shared expert, Qwen3-MoE's top-4 raw gates) under
// expert, tensor, sequence, context and pipeline parallelism and fsdp,
// against one process: loss rtol 1e-4 at every one of 20 steps, parameters
// and optimizer state 1e-3, as the GPT matrix. Nothing under strategies/
// knows the model: the experts name the dimensions tp splits.
//
// Each data-parallel rank routes its own samples (its own balance loss), so
// the reference routes its micro-batch of micro x dp samples as dp groups
// (moe_routing_groups: sample b in group b % dp, the samples the sampler
// deals rank b % dp).
#include <map>
#include <string>
#include <tuple>

#include "core/base/check.h"
#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"
#include "tests/tiny_llama.h"

namespace weft {
namespace {

constexpr double kLossRtol = 1e-4;
constexpr double kParamTol = 1e-3;

struct MoeCase {
  std::string label;
  std::string variant = "mixtral";
  std::string strategy;  // besides expert ("" lets --ep pick ddp)
  int world = 2;
  int micro_batch = 4;
  int ep = 0;
  int tp = 0;
  int pp = 0;
  int cp = 0;
  bool recompute = false;
  double capacity_factor = 0;
};

// Ranks that route separately: those not sharing tokens over tp, pp or cp.
int DataParallel(const MoeCase& c) {
  return c.world / (std::max(1, c.tp) * std::max(1, c.pp) * std::max(1, c.cp));
}

testing::RunOptions MoeRun(const MoeCase& c, int routing_groups) {
  LlamaConfig config = testing::TinyLlamaMoeConfig(c.variant);
  config.set_moe_routing_groups(routing_groups);
  config.set_capacity_factor(static_cast<float>(c.capacity_factor));
  testing::RunOptions o;
  o.make_model = testing::LlamaModelFactory(config, 16);
  return o;
}

GptJob Job(int micro_batch) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  job.mutable_train()->set_micro_batch(micro_batch);
  return job;
}

// One reference per (variant, micro-batch, groups, capacity), shared by the
// cases of a test shard.
const testing::ParityRun& Reference(const MoeCase& c) {
  using Key = std::tuple<std::string, int, int, double>;
  static auto* cache = new std::map<Key, testing::ParityRun>();
  const int dp = DataParallel(c);
  const Key key{c.variant, c.micro_batch * dp, dp, c.capacity_factor};
  auto it = cache->find(key);
  if (it == cache->end()) {
    auto run = testing::RunSingleProcess(Job(c.micro_batch * dp), MoeRun(c, dp));
    WEFT_CHECK_OK(run.status());
    WEFT_CHECK(run->params.count("blocks.0.mlp.experts.gate_up_weight") == 1)
        << "no Llama experts";
    it = cache->emplace(key, *run).first;
  }
  return it->second;
}

class LlamaMoeParityTest : public ::testing::TestWithParam<MoeCase> {};

TEST_P(LlamaMoeParityTest, MatchesOneProcess) {
  const MoeCase& c = GetParam();
  const testing::ParityRun& single = Reference(c);
  GptJob job = Job(c.micro_batch);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy(c.strategy);
  if (c.ep > 0) p->set_ep(c.ep);
  if (c.tp > 0) p->set_tp(c.tp);
  if (c.pp > 0) {
    p->set_pp(c.pp);
    p->set_pp_split("layers");
  }
  if (c.cp > 0) p->set_cp(c.cp);
  job.mutable_train()->set_recompute(c.recompute);
  auto multi = testing::RunMultiProcess(job, c.world, MoeRun(c, 1));
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(single, *multi, kLossRtol, kParamTol, c.label);
  std::printf("%s: max loss rdiff %.2e, param diff %.2e\n", c.label.c_str(),
              testing::MaxLossRelDiff(*multi, single),
              testing::MaxRelativeDifference(multi->params, single.params));
  // The balance loss is logged, and the same as one process's where the
  // ranks route the same groups (rank 0 logs its own routing groups under
  // data parallelism, its own stage's layers under pp).
  if (c.pp == 0 && DataParallel(c) == 1) {
    EXPECT_NEAR(testing::MeanOverSteps(*multi, "moe_aux_loss"),
                testing::MeanOverSteps(single, "moe_aux_loss"), 1e-4)
        << c.label;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, LlamaMoeParityTest,
    ::testing::Values(
        MoeCase{.label = "ep2", .ep = 2},
        MoeCase{.label = "ep2_fsdp2", .strategy = "fsdp", .world = 4, .micro_batch = 2, .ep = 2},
        MoeCase{.label = "ep2_capacity1", .ep = 2, .capacity_factor = 1.0},
        MoeCase{.label = "ep2_sigmoid_shared", .variant = "sigmoid_shared", .ep = 2},
        MoeCase{.label = "ep4_qwen3_top4", .variant = "qwen3", .world = 4, .micro_batch = 2,
                .ep = 4},
        // Every expert's hidden units split over tp, gate and up each in halves.
        MoeCase{.label = "tp2", .strategy = "tp", .micro_batch = 8, .tp = 2},
        MoeCase{.label = "sp2_sigmoid_shared", .variant = "sigmoid_shared", .strategy = "sp",
                .micro_batch = 8, .tp = 2},
        MoeCase{.label = "ep2_tp2", .strategy = "tp", .world = 4, .micro_batch = 4, .ep = 2,
                .tp = 2},
        MoeCase{.label = "pp2", .micro_batch = 2, .pp = 2},
        // The routing group spans both zigzag chunks of each sequence.
        MoeCase{.label = "cp2", .micro_batch = 8, .cp = 2},
        MoeCase{.label = "fsdp2_recompute", .strategy = "fsdp", .recompute = true}),
    [](const ::testing::TestParamInfo<MoeCase>& i) { return i.param.label; });

}  // namespace
}  // namespace weft
