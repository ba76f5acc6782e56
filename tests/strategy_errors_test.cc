// Bad parallel configurations end with clear errors on every rank, never a
// hang or a wrong result.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/parallel/strategy_registry.h"
#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

GptJob Job() {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(2);
  return job;
}

TEST(StrategyErrorsTest, UnknownStrategyListsTheRegisteredOnes) {
  GptJob job = Job();
  job.mutable_train()->mutable_parallel()->set_strategy("fsdpp");
  absl::Status s = testing::MakeGptTrainer(job).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("unknown strategy 'fsdpp'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("ddp, dp, expert, fsdp, pp, recompute, sp, tp, zero"), std::string::npos) << s;
}

TEST(StrategyErrorsTest, ZeroStageFourIsRejected) {
  GptJob job = Job();
  job.mutable_train()->mutable_parallel()->set_strategy("zero");
  job.mutable_train()->mutable_parallel()->set_zero_stage(4);
  absl::Status s = testing::MakeGptTrainer(job).status();
  EXPECT_NE(s.message().find("zero_stage=4"), std::string::npos) << s;
}

TEST(StrategyErrorsTest, TwoDataParallelStrategiesAreRejected) {
  GptJob job = Job();
  job.mutable_train()->mutable_parallel()->set_strategy("ddp,fsdp");
  const absl::Status s = testing::MakeGptTrainer(job).status();
  EXPECT_NE(s.message().find("at most one data-parallel strategy (ddp, dp, fsdp, zero)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("hybrid sharding (HSDP)"), std::string::npos) << s;
}

// Ranks started by hand with another flag, or another copy of the data,
// fail at startup naming the difference (job_agreement.h), instead of
// training out of step. Rank 0 learns it from rank 1's report and fails
// at once with the same message, not at its timeout (60 s here).
TEST(StrategyErrorsTest, RanksWithAnotherJobOrOtherDataAreNamed) {
  GptJob job = Job();
  job.mutable_train()->mutable_parallel()->set_strategy("ddp");
  job.mutable_train()->mutable_parallel()->set_timeout_s(60);
  job.mutable_train()->set_micro_batch(4);
  testing::RunOptions lr;
  lr.per_rank = [](int rank, GptJob* j) {
    if (rank == 1) j->mutable_train()->mutable_optim()->set_lr(0.03f);
  };
  const absl::Time start = absl::Now();
  absl::Status s = testing::RunMultiProcess(job, 2, lr).status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << s;
  EXPECT_NE(s.message().find("rank 1 runs another job than rank 0: 'lr: 0.03' here"),
            std::string::npos)
      << s;
  // The same text with one character swapped for another it lacks: the
  // character vocabulary, hence every later token id, moves.
  const std::string other = std::string(std::getenv("TEST_TMPDIR")) + "/other_copy";
  std::filesystem::create_directories(other);
  const std::string copy = testing::WriteCorpus(other);
  std::string text;
  {
    std::ifstream in(copy);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_NE(text.find('q'), std::string::npos);
  std::replace(text.begin(), text.end(), 'q', '#');
  std::ofstream(copy, std::ios::trunc) << text;
  testing::RunOptions data;
  data.per_rank = [&copy](int rank, GptJob* j) {
    if (rank == 1) j->mutable_train()->mutable_data()->set_data(copy);
  };
  s = testing::RunMultiProcess(job, 2, data).status();
  EXPECT_NE(s.message().find("rank 1 reads other data than rank 0: 'training data: "),
            std::string::npos)
      << s;
}

TEST(StrategyErrorsTest, WorldSizeThatDoesNotDivideTheBatch) {
  GptJob job = Job();
  job.mutable_train()->mutable_parallel()->set_strategy("ddp");
  job.mutable_train()->set_global_batch(8);
  job.mutable_train()->set_micro_batch(3);
  auto r = testing::RunMultiProcess(job, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("global_batch=8 is not divisible by micro_batch=3 x "
                                      "data-parallel ranks=2"),
            std::string::npos)
      << r.status();
}

TEST(StrategyErrorsTest, FsdpOnAMeshWithoutShards) {
  GptJob job = Job();
  job.mutable_train()->mutable_parallel()->set_strategy("fsdp");
  job.mutable_train()->mutable_parallel()->set_dp_replicate(2);
  job.mutable_train()->set_micro_batch(4);
  auto r = testing::RunMultiProcess(job, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("dp_shard axis has size 1"), std::string::npos)
      << r.status();
}

TEST(StrategyErrorsTest, MeshAxisNoStrategyUses) {
  GptJob job = Job();
  job.mutable_train()->mutable_parallel()->set_strategy("ddp");
  job.mutable_train()->mutable_parallel()->set_tp(2);
  job.mutable_train()->set_micro_batch(8);
  auto r = testing::RunMultiProcess(job, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no strategy uses mesh axis tp of size 2"),
            std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("set --tp=1"), std::string::npos) << r.status();

  job.mutable_train()->mutable_parallel()->set_tp(1);
  job.mutable_train()->mutable_parallel()->set_ep(2);
  job.mutable_train()->set_micro_batch(4);
  // --ep=2 brings the expert strategy, which needs MoE layers.
  r = testing::RunMultiProcess(job, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--strategy=expert on a model without MoE layers"),
            std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("set --moe_every"), std::string::npos) << r.status();
}

TEST(StrategyErrorsTest, MeshSizesThatDoNotFitTheWorld) {
  GptJob job = Job();
  job.mutable_train()->mutable_parallel()->set_strategy("ddp");
  job.mutable_train()->mutable_parallel()->set_dp_shard(3);
  job.mutable_train()->set_micro_batch(4);
  auto r = testing::RunMultiProcess(job, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("multiply to 3 but the world size is 2"), std::string::npos)
      << r.status();
}

TEST(StrategyErrorsTest, UnknownStrategyOption) {
  GptJob job = Job();
  job.mutable_train()->mutable_parallel()->set_strategy("ddp");
  job.mutable_train()->mutable_parallel()->set_strategy_options("zero_stage=2");
  job.mutable_train()->set_micro_batch(4);
  auto r = testing::RunMultiProcess(job, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown strategy option 'zero_stage'"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("ddp: bucket_mb, overlap"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("belongs to zero"), std::string::npos) << r.status();
}

// A misspelt wrap type used to leave every parameter in the root unit
// (gathered whole, like ddp) without a word.
TEST(StrategyErrorsTest, WrapTypeThatNamesNoModule) {
  for (const auto& [strategy, options] :
       std::vector<std::pair<std::string, std::string>>{
           {"fsdp", "fsdp_wrap=TransformerBlok"}, {"zero", "zero_stage=3,zero3_wrap=Linear|Foo"}}) {
    GptJob job = Job();
    job.mutable_train()->mutable_parallel()->set_strategy(strategy);
    job.mutable_train()->mutable_parallel()->set_strategy_options(options);
    job.mutable_train()->set_micro_batch(4);
    auto r = testing::RunMultiProcess(job, 2);
    ASSERT_FALSE(r.ok()) << options;
    EXPECT_NE(r.status().message().find("names no module of this model"), std::string::npos)
        << r.status();
    EXPECT_NE(r.status().message().find("TransformerBlock"), std::string::npos) << r.status();
  }
}

// --strategy=expert named without a data-parallel strategy gets ddp for the
// dense weights, as --ep alone does (it was "no strategy uses mesh axis
// dp_shard", although expert works on the ranks carved from it).
TEST(StrategyErrorsTest, NamedExpertGetsDdpLikeImpliedExpert) {
  GptJob job = Job();
  job.mutable_model()->set_moe_every(2);
  job.mutable_model()->set_num_experts(4);
  job.mutable_train()->set_steps(2);
  job.mutable_train()->set_micro_batch(4);
  job.mutable_train()->mutable_parallel()->set_ep(2);
  auto implied = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(implied.ok()) << implied.status();
  job.mutable_train()->mutable_parallel()->set_strategy("expert");
  auto named = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(named.ok()) << named.status();
  testing::ExpectParity(*implied, *named, 0, 0, "--strategy=expert vs --ep alone");
  // Without --ep it splits nothing, and says so.
  job.mutable_train()->mutable_parallel()->set_ep(1);
  auto whole = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_TRUE(std::any_of(whole->notes.begin(), whole->notes.end(), [](const std::string& n) {
    return n.find("expert with ep=1") != std::string::npos;
  }));
}

// An empty wrap list is legal (one unit) but worth a word: it used to train
// without one.
TEST(StrategyErrorsTest, EmptyWrapListIsNoted) {
  GptJob job = Job();
  job.mutable_train()->set_steps(1);
  job.mutable_train()->mutable_parallel()->set_strategy("fsdp");
  job.mutable_train()->mutable_parallel()->set_strategy_options("fsdp_wrap=");
  job.mutable_train()->set_micro_batch(4);
  auto r = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(std::any_of(r->notes.begin(), r->notes.end(), [](const std::string& n) {
    return n.find("fsdp_wrap is empty") != std::string::npos;
  }));
}

TEST(StrategyErrorsTest, Stage3WrapAtStage1) {
  GptJob job = Job();
  job.mutable_train()->mutable_parallel()->set_strategy("zero");
  job.mutable_train()->mutable_parallel()->set_strategy_options("zero_stage=1,zero3_wrap=Linear");
  job.mutable_train()->set_micro_batch(4);
  auto r = testing::RunMultiProcess(job, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("zero3_wrap=Linear with zero_stage=1"), std::string::npos)
      << r.status();
}

TEST(StrategyErrorsTest, SeveralRanksWithoutAStrategy) {
  GptJob job = Job();
  job.mutable_train()->set_micro_batch(4);
  auto r = testing::RunMultiProcess(job, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no --strategy"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("--strategy=ddp"), std::string::npos) << r.status();
}

// --tp alone does not pick tp or sp; the hint names them, not ddp.
TEST(StrategyErrorsTest, TpAxisWithoutAStrategyPointsAtTpAndSp) {
  GptJob job = Job();
  job.mutable_train()->set_micro_batch(4);
  job.mutable_train()->mutable_parallel()->set_tp(2);
  auto r = testing::RunMultiProcess(job, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--tp=2 takes effect with --strategy=tp or sp"),
            std::string::npos)
      << r.status();
  EXPECT_EQ(r.status().message().find("--strategy=ddp"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace weft
