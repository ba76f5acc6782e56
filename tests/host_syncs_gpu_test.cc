// On CUDA a training step synchronizes the host exactly once: the read of
// the loss (and the gradient norm beside it). Everything else, data copies,
// gradient reductions and the optimizer, is stream-ordered. Counted on the
// training thread (the loader's workers wait on their own copies' events
// before refilling a pinned slot: off the training thread, 1 per batch), for
// plain training and for ddp, zero-2 and fsdp at world size 1 over NCCL.
// The loss and the gradient norm used to be two reads: 2 syncs per step.
#include <memory>
#include <string>

#include "comm/store/hash_store.h"
#include "core/runtime/trainer.h"
#include "core/tensor/device_backend.h"
#include "gtest/gtest.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

TEST(HostSyncsGpuTest, OneHostSyncPerStep) {
  absl::StatusOr<DeviceBackend*> backend = GetDeviceBackend(DeviceType::kCUDA);
  ASSERT_TRUE(backend.ok()) << backend.status();
  for (const std::string strategy : {"", "ddp", "zero", "fsdp"}) {
    SCOPED_TRACE("strategy '" + strategy + "'");
    GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
    job.mutable_train()->set_device("cuda");
    job.mutable_train()->set_dtype("bf16");
    job.mutable_train()->mutable_parallel()->set_strategy(strategy);
    job.mutable_train()->mutable_parallel()->set_zero_stage(2);
    job.mutable_train()->mutable_parallel()->set_backend("nccl");
    JobTopology topology;
    topology.store = std::make_shared<comm::HashStore>();
    auto trainer = testing::MakeGptTrainer(job, topology);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    for (int i = 0; i < 2; ++i) ASSERT_TRUE((*trainer)->TrainStep().ok());  // warm-up
    const int64_t before = (*backend)->HostSyncCountOnThisThread();
    constexpr int kSteps = 3;
    for (int i = 0; i < kSteps; ++i) ASSERT_TRUE((*trainer)->TrainStep().ok());
    EXPECT_EQ((*backend)->HostSyncCountOnThisThread() - before, kSteps);
  }
}

// A mixture-of-experts layer adds host syncs by design: per layer and
// micro-batch in training, the read of the top-k choices (the routing plan,
// core/nn/moe.h), the two index tables it sends back (slots, rows), the
// reads of the router probabilities and log-sum-exps (balance and z-loss
// statistics) and the balance-loss gradient sent back: 6; backward adds
// none. Under ep (not at world size 1) the dispatcher adds 2 (its counts
// sent and the exchanged counts read). Counted by reading the code: this
// test has not run on a GPU yet.
TEST(HostSyncsGpuTest, SixHostSyncsPerMoeLayer) {
  absl::StatusOr<DeviceBackend*> backend = GetDeviceBackend(DeviceType::kCUDA);
  ASSERT_TRUE(backend.ok()) << backend.status();
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_device("cuda");
  job.mutable_train()->set_dtype("bf16");
  job.mutable_model()->set_moe_every(1);  // both blocks
  job.mutable_model()->set_num_experts(4);
  job.mutable_model()->set_top_k(2);
  JobTopology topology;
  topology.store = std::make_shared<comm::HashStore>();
  auto trainer = testing::MakeGptTrainer(job, topology);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*trainer)->TrainStep().ok());  // warm-up
  const int64_t before = (*backend)->HostSyncCountOnThisThread();
  constexpr int kSteps = 3, kMoeLayers = 2;
  for (int i = 0; i < kSteps; ++i) ASSERT_TRUE((*trainer)->TrainStep().ok());
  EXPECT_EQ((*backend)->HostSyncCountOnThisThread() - before, kSteps * (1 + 6 * kMoeLayers));
}

}  // namespace
}  // namespace weft
