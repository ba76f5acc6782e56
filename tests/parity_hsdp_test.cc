// HSDP on a 2x2 mesh [dp_replicate=2, dp_shard=2] (4 gloo processes) vs one
// process: same losses and parameters.
#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

TEST(HsdpParityTest, TwoByTwoMeshMatchesOneProcess) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy("fsdp");
  p->set_dp_replicate(2);
  p->set_dp_shard(2);
  job.mutable_train()->set_micro_batch(2);
  auto multi = testing::RunMultiProcess(job, 4);
  ASSERT_TRUE(multi.ok()) << multi.status();
  testing::ExpectParity(*single, *multi, 1e-4, 1e-3, "hsdp 2x2");
  // Sharded over 2: reduce-scatter over dp_shard, all-reduce over dp_replicate.
  EXPECT_GT(multi->comm.at("reduce_scatter"), 0);
  EXPECT_GT(multi->comm.at("all_reduce"), 0);
}

}  // namespace
}  // namespace weft
