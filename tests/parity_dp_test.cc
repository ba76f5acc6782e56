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

// MoE layers route per batch of rows, so dp's replicas (contiguous shares
// of each micro-batch) train as one process does at micro_batch / replicas,
// with capacity drops and balance losses in play; the startup note says so.
TEST(DpParityTest, MoeReplicasMatchOneProcessAtTheirShareOfTheMicroBatch) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(12);
  GptConfig* m = job.mutable_model();
  m->set_moe_every(1);
  m->set_num_experts(4);
  m->set_top_k(2);
  m->set_capacity_factor(1.25f);
  m->set_moe_aux_loss_coef(0.01f);
  m->set_moe_z_loss_coef(0.001f);
  const int64_t micro = job.train().micro_batch();
  ASSERT_EQ(micro % 2, 0);
  GptJob halves = job;
  halves.mutable_train()->set_micro_batch(micro / 2);
  auto single = testing::RunSingleProcess(halves);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy("dp");
  p->set_dp_devices(2);
  auto run = testing::RunSingleProcess(job);
  ASSERT_TRUE(run.ok()) << run.status();
  testing::ExpectParity(*single, *run, 1e-4, 1e-3, "dp devices 2, MoE");
  ASSERT_EQ(run->notes.size(), 1u);
  EXPECT_NE(run->notes[0].find("one process at micro_batch / 2"), std::string::npos)
      << run->notes[0];
}

}  // namespace
}  // namespace weft
