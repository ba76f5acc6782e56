#include "gtest/gtest.h"
#include "core/kernels/cpu/cpu_ops.h"
#include "core/testing/grad_check.h"

namespace weft::cpu {
namespace {

using ::weft::testing::NumericalGradient;
using ::weft::testing::RandomTensor;
using ::weft::testing::RelativeError;
using ::weft::testing::Values;
using ::weft::testing::WeightedSum;

const KernelContext kCtx{Device::Cpu()};

TEST(GeluTest, BackwardMatchesFiniteDifferences) {
  CpuKernelOps ops;
  Tensor x = RandomTensor({50}, 1, 4.f), r = RandomTensor({50}, 2);
  Tensor out = *Tensor::Empty({50}, DType::kF32), dx = *Tensor::Empty({50}, DType::kF32);
  auto loss = [&] {
    WEFT_CHECK_OK(ops.GeluForward(kCtx, out, x));
    return WeightedSum(out, r);
  };
  ASSERT_TRUE(ops.GeluBackward(kCtx, dx, r, x).ok());
  EXPECT_LT(RelativeError(Values(dx), NumericalGradient(x, loss, 1e-3f)), 1e-3);
}

TEST(GeluTest, KnownValues) {
  CpuKernelOps ops;
  Tensor x = *Tensor::FromFloats({0.f, 1.f, -1.f, 3.f}, {4});
  Tensor out = *Tensor::Empty({4}, DType::kF32);
  ASSERT_TRUE(ops.GeluForward(kCtx, out, x).ok());
  // Tanh-approximation GELU values.
  EXPECT_FLOAT_EQ(out.data<float>()[0], 0.f);
  EXPECT_NEAR(out.data<float>()[1], 0.841192f, 1e-5);
  EXPECT_NEAR(out.data<float>()[2], -0.158808f, 1e-5);
  EXPECT_NEAR(out.data<float>()[3], 2.996363f, 1e-5);
}

TEST(ElementwiseTest, AddScaleSum) {
  CpuKernelOps ops;
  Tensor a = *Tensor::FromFloats({1, 2, 3}, {3}), b = *Tensor::FromFloats({10, 20, 30}, {3});
  ASSERT_TRUE(ops.Add(kCtx, a, a, b).ok());  // in place
  EXPECT_EQ(Values(a), (std::vector<float>{11, 22, 33}));
  ASSERT_TRUE(ops.Scale(kCtx, a, 0.5f).ok());
  EXPECT_EQ(Values(a), (std::vector<float>{5.5f, 11, 16.5f}));
  Tensor s = *Tensor::FromFloats({100}, {1});
  ASSERT_TRUE(ops.Sum(kCtx, s, a, /*accumulate=*/true).ok());
  EXPECT_FLOAT_EQ(s.data<float>()[0], 133.f);
  Tensor t[] = {a, b};
  ASSERT_TRUE(ops.SumSquares(kCtx, s, t).ok());
  EXPECT_FLOAT_EQ(s.data<float>()[0], 5.5f * 5.5f + 121 + 16.5f * 16.5f + 100 + 400 + 900);
}

TEST(ElementwiseTest, ZeroTensorsClearsEveryTensorAndOnlyThem) {
  CpuKernelOps ops;
  Tensor a = RandomTensor({3, 5}, 1), b = RandomTensor({7}, 2), c = RandomTensor({4}, 3);
  Tensor view = c.Slice(0, 1, 3);  // elements 1 and 2 of c
  const float c0 = c.data<float>()[0], c3 = c.data<float>()[3];
  ASSERT_TRUE(ops.ZeroTensors(kCtx, {a, b, view}).ok());
  for (float v : Values(a)) EXPECT_EQ(v, 0.f);
  for (float v : Values(b)) EXPECT_EQ(v, 0.f);
  EXPECT_EQ(Values(c), (std::vector<float>{c0, 0.f, 0.f, c3}));
}

TEST(DropoutTest, MaskDependsOnlyOnSeedAndPosition) {
  CpuKernelOps ops;
  const int n = 4096;
  Tensor x = testing::FilledTensor({n}, 1.f);
  Tensor full = *Tensor::Empty({n}, DType::kF32);
  ASSERT_TRUE(ops.DropoutForward(kCtx, full, x, 0.25f, 7, 0).ok());
  // The second half computed alone at offset n/2 equals the tail of the full run.
  Tensor half_in = testing::FilledTensor({n / 2}, 1.f);
  Tensor half = *Tensor::Empty({n / 2}, DType::kF32);
  ASSERT_TRUE(ops.DropoutForward(kCtx, half, half_in, 0.25f, 7, n / 2).ok());
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    const float v = full.data<float>()[i];
    ASSERT_TRUE(v == 0.f || v == 1.f / 0.75f);
    kept += v != 0.f;
    if (i >= n / 2) {
      ASSERT_EQ(v, half.data<float>()[i - n / 2]);
    }
  }
  EXPECT_NEAR(kept / double(n), 0.75, 0.03);
  // Backward applies the same mask.
  Tensor dx = *Tensor::Empty({n}, DType::kF32);
  ASSERT_TRUE(ops.DropoutBackward(kCtx, dx, x, 0.25f, 7, 0).ok());
  EXPECT_EQ(Values(dx), Values(full));
}

TEST(DropoutTest, InvalidProbabilityIsAnError) {
  CpuKernelOps ops;
  Tensor x = testing::FilledTensor({4}, 1.f), out = *Tensor::Empty({4}, DType::kF32);
  EXPECT_FALSE(ops.DropoutForward(kCtx, out, x, 1.0f, 1, 0).ok());
  EXPECT_FALSE(ops.DropoutForward(kCtx, out, x, -0.1f, 1, 0).ok());
}

}  // namespace
}  // namespace weft::cpu
