#include <cmath>

#include "gtest/gtest.h"
#include "core/kernels/cpu/cpu_ops.h"
#include "core/testing/grad_check.h"

namespace weft::cpu {
namespace {

using ::weft::testing::NumericalGradient;
using ::weft::testing::RandomTensor;
using ::weft::testing::RelativeError;
using ::weft::testing::Values;

const KernelContext kCtx{Device::Cpu()};

TEST(CrossEntropyTest, UniformLogitsGiveLogVocab) {
  CpuKernelOps ops;
  Tensor logits = *Tensor::Zeros({2, 8}, DType::kF32);  // 6 real + 2 padded columns
  Tensor targets = *Tensor::FromVector<int32_t>(std::vector<int32_t>{0, 5}, {2});
  Tensor losses = *Tensor::Empty({2}, DType::kF32);
  ASSERT_TRUE(ops.CrossEntropyForwardBackward(kCtx, losses, logits, targets, 6, 1.f, false).ok());
  EXPECT_NEAR(losses.data<float>()[0], std::log(6.f), 1e-6);
}

TEST(CrossEntropyTest, GradientMatchesFiniteDifferencesAndSkipsPadding) {
  CpuKernelOps ops;
  const int64_t rows = 3, vp = 7, v = 5;
  Tensor logits = RandomTensor({rows, vp}, 1, 3.f);
  Tensor targets = *Tensor::FromVector<int32_t>(std::vector<int32_t>{4, 0, 2}, {rows});
  const float scale = 1.f / rows;
  auto loss = [&] {
    Tensor copy = *logits.Clone();
    Tensor losses = *Tensor::Empty({rows}, DType::kF32);
    WEFT_CHECK_OK(ops.CrossEntropyForwardBackward(kCtx, losses, copy, targets, v, 1, false));
    double s = 0;
    for (int i = 0; i < rows; ++i) s += losses.data<float>()[i];
    return s * scale;
  };
  std::vector<float> numeric = NumericalGradient(logits, loss, 1e-3f);
  Tensor losses = *Tensor::Empty({rows}, DType::kF32);
  Tensor grad = *logits.Clone();
  ASSERT_TRUE(ops.CrossEntropyForwardBackward(kCtx, losses, grad, targets, v, scale, true).ok());
  EXPECT_LT(RelativeError(Values(grad), numeric), 1e-3);
  for (int r = 0; r < rows; ++r) {
    EXPECT_EQ(grad.data<float>()[r * vp + 5], 0.f);
    EXPECT_EQ(grad.data<float>()[r * vp + 6], 0.f);
  }
}

TEST(CrossEntropyTest, NegativeTargetsAreIgnored) {
  CpuKernelOps ops;
  Tensor logits = RandomTensor({2, 4}, 1);
  Tensor targets = *Tensor::FromVector<int32_t>(std::vector<int32_t>{-1, 2}, {2});
  Tensor losses = *Tensor::Empty({2}, DType::kF32);
  ASSERT_TRUE(ops.CrossEntropyForwardBackward(kCtx, losses, logits, targets, 4, 1, true).ok());
  EXPECT_EQ(losses.data<float>()[0], 0.f);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(logits.data<float>()[j], 0.f);
  EXPECT_GT(losses.data<float>()[1], 0.f);
}

TEST(CrossEntropyTest, TargetBeyondVocabIsAnError) {
  CpuKernelOps ops;
  Tensor logits = RandomTensor({1, 4}, 1);
  Tensor targets = *Tensor::FromVector<int32_t>(std::vector<int32_t>{3}, {1});
  Tensor losses = *Tensor::Empty({1}, DType::kF32);
  EXPECT_FALSE(ops.CrossEntropyForwardBackward(kCtx, losses, logits, targets, 3, 1, true).ok());
}

}  // namespace
}  // namespace weft::cpu
