// The out-of-tree strategy workflow: //strategies/freeze is built as a
// shared object, this binary does not link it, and --plugin loads it. It
// then composes with built-in strategies (freeze runs before ddp).
#include "core/parallel/strategy_registry.h"
#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

std::string PluginPath() {
  return std::string(std::getenv("TEST_SRCDIR")) + "/weft/strategies/freeze/libweft_freeze.so";
}

GptJob FreezeJob() {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(5);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_plugin(PluginPath());
  p->set_strategy("freeze");
  p->set_strategy_options("freeze=embed");
  return job;
}

TEST(PluginTest, UnknownUntilLoadedThenFreezesTheEmbeddings) {
  EXPECT_EQ(CreateStrategy("freeze").status().code(), absl::StatusCode::kNotFound);
  GptJob job = FreezeJob();
  auto trainer = testing::MakeGptTrainer(job);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  EXPECT_TRUE(CreateStrategy("freeze").ok());  // loaded by --plugin
  auto before = *testing::ParameterSnapshot(**trainer);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*trainer)->TrainStep().ok());
  auto after = *testing::ParameterSnapshot(**trainer);
  EXPECT_EQ(after.at("embed.wte"), before.at("embed.wte"));
  EXPECT_EQ(after.at("embed.wpe"), before.at("embed.wpe"));
  EXPECT_NE(after.at("blocks.0.attn.qkv.weight"), before.at("blocks.0.attn.qkv.weight"));
}

TEST(PluginTest, ComposesWithDdpAcrossRanks) {
  GptJob job = FreezeJob();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  job.mutable_train()->mutable_parallel()->set_strategy("ddp,freeze");  // any order
  job.mutable_train()->set_micro_batch(4);
  auto multi = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, 1e-4, 1e-3, "freeze + ddp");
}

// A zero-bubble pipeline computes Linear weight gradients in W, after the
// module's backward returned: freeze zeroes them when they are final (its
// gradients-ready hook runs behind W), so the frozen block stays at its
// initial values, bitwise those one process keeps.
TEST(PluginTest, FreezesUnderAZeroBubblePipeline) {
  GptJob job = FreezeJob();
  job.mutable_train()->mutable_parallel()->set_strategy_options("freeze=blocks.0");
  job.mutable_train()->set_micro_batch(2);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_pp(2);
  p->set_pp_schedule("zbh1");
  auto multi = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(multi.ok()) << multi.status();
  int frozen = 0;
  for (const auto& [name, values] : single->params) {
    if (name.rfind("blocks.0.", 0) != 0) continue;
    EXPECT_EQ(multi->params.at(name), values) << name;
    ++frozen;
  }
  EXPECT_GT(frozen, 0);
  testing::ExpectParity(*single, *multi, 1e-4, 1e-3, "freeze + pp zbh1");
}

// The tied table under a pipeline: the last stage's head borrows a copy
// of wte, whose gradient is summed into the first stage's after backward.
// Freezing the embedding must zero that half too.
TEST(PluginTest, FreezesATiedEmbeddingAcrossPipelineEnds) {
  GptJob job = FreezeJob();
  job.mutable_train()->set_micro_batch(2);
  job.mutable_train()->mutable_parallel()->set_pp(2);
  auto multi = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(multi.ok()) << multi.status();
  job.mutable_train()->set_steps(1);
  // One step at an lr below the last bit of every weight: the initial values.
  job.mutable_train()->mutable_optim()->set_lr(1e-30f);
  job.mutable_train()->mutable_optim()->set_min_lr(0.f);
  job.mutable_train()->mutable_optim()->set_weight_decay(0.f);
  auto start = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(multi->params.at("embed.wte"), start->params.at("embed.wte"));
  EXPECT_EQ(multi->params.at("embed.wpe"), start->params.at("embed.wpe"));
  EXPECT_NE(multi->params.at("blocks.0.attn.qkv.weight"), start->params.at("blocks.0.attn.qkv.weight"));
}

TEST(PluginTest, BadPluginOptionsAreClearErrors) {
  GptJob job = FreezeJob();
  job.mutable_train()->mutable_parallel()->set_strategy_options("freeze=nothing_here");
  absl::Status s = testing::MakeGptTrainer(job).status();
  EXPECT_NE(s.message().find("no parameters under nothing_here"), std::string::npos) << s;
  job.mutable_train()->mutable_parallel()->set_plugin("/nonexistent/libx.so");
  EXPECT_EQ(testing::MakeGptTrainer(job).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace weft
