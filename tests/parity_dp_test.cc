// dp (one process, replicas on 2 and 4 CPU "devices" in threads) vs no
// strategy: same loss at every step and same parameters after 20 steps.
#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

TEST(DpParityTest, TwoAndFourReplicasMatchOneModel) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(20);
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy("dp");
  for (int devices : {2, 4}) {
    p->set_dp_devices(devices);
    auto run = testing::RunSingleProcess(job);
    ASSERT_TRUE(run.ok()) << run.status();
    testing::ExpectParity(*single, *run, 1e-4, 1e-3, "dp devices " + std::to_string(devices));
  }
  // Uneven split: 8 sequences over 3 replicas (3, 3, 2).
  p->set_dp_devices(3);
  auto uneven = testing::RunSingleProcess(job);
  ASSERT_TRUE(uneven.ok()) << uneven.status();
  testing::ExpectParity(*single, *uneven, 1e-4, 1e-3, "dp devices 3");
}

}  // namespace
}  // namespace weft
