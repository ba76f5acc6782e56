#include <cmath>
#include <memory>

#include "core/optim/f16_rounding.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "core/testing/grad_check.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

using ::weft::testing::FilledTensor;

// llm.c's get_learning_rate(step - 1) for 1-based steps: the warmup's last
// step and the first after it both run at the peak.
TEST(LrScheduleTest, WarmupThenCosineToMin) {
  LrSchedule s = *LrSchedule::Create(1.0f, 0.1f, 10, 110, "cosine");
  EXPECT_FLOAT_EQ(s.At(1), 0.1f);
  EXPECT_FLOAT_EQ(s.At(10), 1.0f);
  EXPECT_FLOAT_EQ(s.At(11), 1.0f);
  EXPECT_NEAR(s.At(61), 0.55f, 1e-5);  // half way: (61 - 1 - 10) / 100
  EXPECT_NEAR(s.At(110), 0.1f + 0.9f * 0.5f * (1 + std::cos(0.99f * 3.14159265f)), 1e-6);
  EXPECT_NEAR(s.At(500), 0.1f, 1e-6);  // clamped past the end
}

TEST(LrScheduleTest, WithoutWarmupTheFirstStepRunsAtThePeak) {
  EXPECT_FLOAT_EQ(LrSchedule::Create(1.0f, 0.0f, 0, 100, "cosine")->At(1), 1.0f);
  EXPECT_FLOAT_EQ(LrSchedule::Create(1.0f, 0.0f, 0, 100, "linear")->At(1), 1.0f);
}

TEST(LrScheduleTest, LinearAndConstant) {
  EXPECT_NEAR(LrSchedule::Create(1.0f, 0.0f, 0, 100, "linear")->At(51), 0.5f, 1e-6);
  EXPECT_NEAR(LrSchedule::Create(1.0f, 0.0f, 0, 100, "linear")->At(100), 0.01f, 1e-6);
  EXPECT_FLOAT_EQ(LrSchedule::Create(1.0f, 0.0f, 0, 100, "constant")->At(77), 1.0f);
}

TEST(LrScheduleTest, BadConfigsAreErrors) {
  EXPECT_FALSE(LrSchedule::Create(0.f, 0.f, 0, 10, "cosine").ok());
  EXPECT_FALSE(LrSchedule::Create(1.f, 2.f, 0, 10, "cosine").ok());
  EXPECT_FALSE(LrSchedule::Create(1.f, 0.f, 0, 0, "cosine").ok());
  EXPECT_NE(LrSchedule::Create(1.f, 0.f, 0, 10, "step").status().message().find("cosine"),
            std::string::npos);
}

TEST(OptimizerTest, F32ParamsAreTheirOwnMaster) {
  Tensor w = FilledTensor({4}, 1.f), g = FilledTensor({4}, 0.5f);
  auto opt = *Optimizer::Create({.name = "adamw", .weight_decay = 0.f},
                                {{"w", w, g, true}}, Device::Cpu(), nullptr, nullptr);
  EXPECT_EQ(opt->StateBytes(), 2 * 16);  // exp_avg + exp_avg_sq, no master copy
  ASSERT_TRUE(opt->Step({Device::Cpu()}, {.lr = 0.1f, .step = 1}).ok());
  // First Adam step moves every weight by lr (sign of the gradient).
  const std::vector<float> values = *w.ToFloats();
  for (float v : values) EXPECT_NEAR(v, 0.9f, 1e-6);
}

TEST(OptimizerTest, Bf16ParamsGetAnF32MasterAndAreRefreshed) {
  Tensor w = *FilledTensor({3}, 1.f).ToDType(DType::kBF16);
  Tensor g = FilledTensor({3}, 1.f);
  auto opt = *Optimizer::Create({.name = "sgd", .weight_decay = 0.f, .momentum = 0.f},
                                {{"w", w, g, false}}, Device::Cpu(), nullptr, nullptr);
  EXPECT_EQ(opt->StateBytes(), 3 * 4 * 2);  // master + momentum
  // Ten tiny steps: a bf16-only update would round each one away.
  for (int i = 1; i <= 10; ++i) {
    ASSERT_TRUE(opt->Step({Device::Cpu()}, {.lr = 1e-3f, .step = i}).ok());
  }
  EXPECT_NEAR(opt->StateTensors()[0].second.ToFloats()->at(0), 0.99f, 1e-6);
  EXPECT_EQ(w.data<BFloat16>()[0].bits, FloatToBf16Bits(0.99f));
}

// With the per-step values kept in memory (CUDA graph replays), Step stages
// and copies them itself: the same parameters as the by-value path.
TEST(OptimizerTest, StepScalarsInMemoryGiveTheSameUpdates) {
  for (const char* name : {"adamw", "sgd"}) {
    SCOPED_TRACE(name);
    Tensor w[2] = {FilledTensor({5}, 1.f), FilledTensor({5}, 1.f)};
    Tensor g = FilledTensor({5}, 0.25f);
    std::unique_ptr<Optimizer> opt[2];
    for (int i = 0; i < 2; ++i) {
      opt[i] = *Optimizer::Create({.name = name}, {{"w", w[i], g, true}}, Device::Cpu(), nullptr,
                                  nullptr);
    }
    EXPECT_EQ(opt[1]->StageStepScalars(0.1f, 1).code(), absl::StatusCode::kFailedPrecondition);
    ASSERT_TRUE(opt[1]->KeepStepScalarsInMemory(Device::Cpu(), nullptr, nullptr).ok());
    EXPECT_EQ(opt[1]->StageStepScalars(0.1f, 0).code(), absl::StatusCode::kInvalidArgument);
    for (int step = 1; step <= 3; ++step) {
      for (int i = 0; i < 2; ++i) {
        ASSERT_TRUE(opt[i]->Step({Device::Cpu()}, {.lr = 0.1f / step, .step = step}).ok());
      }
    }
    EXPECT_EQ(*w[0].ToFloats(), *w[1].ToFloats());
    EXPECT_NE(w[0].ToFloats()->at(0), 1.f);
  }
}

// --dtype=fp16 on CPU: the f32 value holds only fp16 numbers, the master
// keeps what fp16 cannot (updates far below the value's fp16 spacing).
TEST(OptimizerTest, F16EmulationKeepsAnF32MasterAndRoundsTheValue) {
  for (const char* name : {"adamw", "sgd"}) {
    SCOPED_TRACE(name);
    Tensor w = FilledTensor({3}, 0.1f), g = FilledTensor({3}, 1.f);
    auto opt = *Optimizer::Create(
        {.name = name, .weight_decay = 0.f, .momentum = 0.f, .emulate_f16_params = true},
        {{"w", w, g, false}}, Device::Cpu(), nullptr, nullptr);
    EXPECT_EQ(w.ToFloats()->at(0), RoundToF16(0.1f));  // rounded at creation
    const auto state = opt->TargetState(0);
    ASSERT_EQ(state.front().first, "master");
    EXPECT_EQ(state.front().second.ToFloats()->at(0), 0.1f);  // the exact value
    // fp16's spacing near 0.1 is 2^-14 (6.1e-5): ten 1e-6 steps would each
    // round away on the value itself; the master adds them up.
    for (int i = 1; i <= 10; ++i) {
      ASSERT_TRUE(opt->Step({Device::Cpu()}, {.lr = 1e-6f, .step = i}).ok());
    }
    const float master = opt->TargetState(0).front().second.ToFloats()->at(0);
    EXPECT_NEAR(master, 0.1f - 1e-5f, 1e-7);  // f32 sums of ten steps
    EXPECT_EQ(w.ToFloats()->at(0), RoundToF16(master));
    // A checkpoint's masters loaded: the values follow them, rounded.
    Tensor m = opt->TargetState(0).front().second;
    ASSERT_TRUE(m.CopyFrom(FilledTensor({3}, 0.3f), nullptr).ok());
    ASSERT_TRUE(opt->RefreshParamsFromMasters(nullptr).ok());
    EXPECT_EQ(w.ToFloats()->at(2), RoundToF16(0.3f));
  }
}

TEST(OptimizerTest, UnknownOptimizerAndSizeMismatchAreErrors) {
  Tensor w = FilledTensor({4}, 1.f), g = FilledTensor({3}, 0.5f);
  EXPECT_FALSE(Optimizer::Create({.name = "lamb"}, {}, Device::Cpu(), nullptr, nullptr).ok());
  EXPECT_FALSE(Optimizer::Create({}, {{"w", w, g, true}}, Device::Cpu(), nullptr, nullptr).ok());
}

}  // namespace
}  // namespace weft
