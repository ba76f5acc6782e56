// Pipeline configurations that cannot work fail on every rank with a
// message that says what was wrong and what works, before any step runs.
#include <string>

#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

struct BadCase {
  std::string label;
  int world;
  int pp;
  std::string schedule;
  int virtual_stages = 1;
  int micro_batch = 2;  // 4 micro-batches per step
  int n_layer = 2;      // stages: embed, blocks.0 .. blocks.n-1, head
  std::string dp_strategy;
  std::string expected;  // a phrase of the error
  int zero_stage = 1;
};

class PipelineBadInputTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(PipelineBadInputTest, FailsWithAClearError) {
  const BadCase& c = GetParam();
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(1);
  job.mutable_train()->set_micro_batch(c.micro_batch);
  job.mutable_model()->set_n_layer(c.n_layer);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_pp(c.pp);
  p->set_pp_schedule(c.schedule);
  p->set_pp_virtual_stages(c.virtual_stages);
  p->set_strategy(c.dp_strategy);
  p->set_zero_stage(c.zero_stage);
  auto run = testing::RunMultiProcess(job, c.world);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find(c.expected), std::string::npos) << run.status();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PipelineBadInputTest,
    ::testing::Values(
        BadCase{"more_ranks_than_stages", 4, 4, "1f1b", 1, 2, 1, "", "stages"},
        BadCase{"unknown_schedule", 2, 2, "fifo", 1, 2, 2, "", "gpipe, 1f1b, interleaved, zbh1"},
        BadCase{"fewer_micro_batches_than_stages", 2, 2, "1f1b", 1, 8, 2, "",
                "at least --pp micro-batches per step"},
        BadCase{"virtual_stages_exceed_stages", 2, 2, "interleaved", 3, 2, 2, "", "stages"},
        // zbh1's weight gradients come after later backwards began; these
        // reduce in every backward (ddp and zero-1 run: parity_pp_test).
        BadCase{"zbh1_with_fsdp", 4, 2, "zbh1", 1, 2, 2, "fsdp",
                "reduces gradients in every backward"},
        BadCase{"zbh1_with_zero2", 4, 2, "zbh1", 1, 2, 2, "zero",
                "reduces gradients in every backward", 2}),
    [](const ::testing::TestParamInfo<BadCase>& i) { return i.param.label; });

}  // namespace
}  // namespace weft
