// Checkpoints on CUDA with bf16 compute: the saved values are the fp32
// masters, the bf16 parameters are refreshed from them on load, and the
// async save copies into pinned host buffers. 4 steps + save + a new trainer
// + resume 4 steps equals 8 straight steps bitwise, plain and fsdp (world 1
// over NCCL), with synchronous and async saves; a CUDA checkpoint also
// loads on CPU (f32) with the same values.
#include <filesystem>
#include <memory>
#include <string>

#include "checkpoint/loader.h"
#include "comm/store/hash_store.h"
#include "core/runtime/trainer.h"
#include "gtest/gtest.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

std::vector<double> Train(GptJob job, int steps, bool save, std::map<std::string, std::vector<float>>* state) {
  JobTopology topology;
  topology.store = std::make_shared<comm::HashStore>();
  auto trainer = testing::MakeGptTrainer(job, topology);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return {};
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    auto s = (*trainer)->TrainStep();
    EXPECT_TRUE(s.ok()) << s.status();
    losses.push_back(s->loss);
  }
  if (save) {
    EXPECT_TRUE((*trainer)->SaveCheckpoint().ok());
    EXPECT_TRUE((*trainer)->FinishCheckpoints().ok());
  }
  auto pieces = (*trainer)->ExportState();
  auto host = ToHost(*pieces);
  *state = *Reassemble(*host);
  return losses;
}

TEST(CheckpointGpuTest, ResumeIsBitwiseWithBf16MastersAndPinnedAsyncCopies) {
  for (const std::string strategy : {"", "fsdp"}) {
    for (bool async : {false, true}) {
      SCOPED_TRACE("strategy '" + strategy + "' async " + std::to_string(async));
      GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
      job.mutable_train()->set_device("cuda");
      job.mutable_train()->set_dtype("bf16");
      job.mutable_train()->set_steps(8);
      job.mutable_train()->mutable_parallel()->set_strategy(strategy);
      job.mutable_train()->mutable_parallel()->set_backend("nccl");
      std::map<std::string, std::vector<float>> straight_state, first_state, resumed_state;
      const std::vector<double> straight = Train(job, 8, false, &straight_state);
      const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/gpu_ckpt_" + strategy +
                              (async ? "_async" : "");
      std::filesystem::remove_all(dir);
      job.mutable_train()->set_checkpoint_dir(dir);
      job.mutable_train()->set_checkpoint_async(async);
      std::vector<double> joined = Train(job, 4, true, &first_state);
      job.mutable_train()->set_resume("latest");
      const std::vector<double> rest = Train(job, 4, false, &resumed_state);
      joined.insert(joined.end(), rest.begin(), rest.end());
      EXPECT_EQ(joined, straight);
      EXPECT_EQ(resumed_state, straight_state);

      // The same checkpoint on CPU: the fp32 masters become the f32 values.
      auto ck = ckpt::OpenCheckpoint(dir + "/step_4");
      ASSERT_TRUE(ck.ok()) << ck.status();
      auto full = ckpt::ReadFullTensors(*ck, nullptr);
      ASSERT_TRUE(full.ok());
      for (const auto& [name, values] : first_state) {
        EXPECT_EQ(full->at(name).values, values) << name;
      }
      GptJob cpu = job;
      cpu.mutable_train()->set_device("cpu");
      cpu.mutable_train()->set_dtype("f32");
      cpu.mutable_train()->mutable_parallel()->set_backend("gloo");
      cpu.mutable_train()->set_checkpoint_dir("");
      cpu.mutable_train()->set_checkpoint_async(false);
      cpu.mutable_train()->set_resume(dir + "/step_4");
      auto on_cpu = testing::MakeGptTrainer(cpu);
      ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
      auto snapshot = testing::ParameterSnapshot(**on_cpu);
      ASSERT_TRUE(snapshot.ok());
      for (const auto& [name, values] : *snapshot) EXPECT_EQ(values, first_state.at(name)) << name;
    }
  }
}

}  // namespace
}  // namespace weft
