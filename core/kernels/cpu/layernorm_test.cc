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
using ::weft::testing::WeightedSum;

const KernelContext kCtx{Device::Cpu()};

TEST(LayerNormTest, NormalizesRows) {
  CpuKernelOps ops;
  Tensor x = RandomTensor({3, 16}, 1, 5.f);
  Tensor w = *Tensor::FromFloats(std::vector<float>(16, 1.f), {16});
  Tensor b = *Tensor::Zeros({16}, DType::kF32);
  Tensor out = *Tensor::Empty({3, 16}, DType::kF32);
  Tensor mean = *Tensor::Empty({3}, DType::kF32), rstd = *Tensor::Empty({3}, DType::kF32);
  ASSERT_TRUE(ops.LayerNormForward(kCtx, out, mean, rstd, x, w, b, 1e-5f).ok());
  for (int r = 0; r < 3; ++r) {
    double s = 0, s2 = 0;
    for (int i = 0; i < 16; ++i) {
      s += out.data<float>()[r * 16 + i];
      s2 += std::pow(out.data<float>()[r * 16 + i], 2);
    }
    EXPECT_NEAR(s / 16, 0, 1e-5);
    EXPECT_NEAR(s2 / 16, 1, 1e-3);
  }
}

TEST(LayerNormTest, BackwardMatchesFiniteDifferences) {
  CpuKernelOps ops;
  const int64_t n = 4, c = 8;
  Tensor x = RandomTensor({n, c}, 1), w = RandomTensor({c}, 2), b = RandomTensor({c}, 3);
  Tensor r = RandomTensor({n, c}, 4);
  Tensor out = *Tensor::Empty({n, c}, DType::kF32);
  Tensor mean = *Tensor::Empty({n}, DType::kF32), rstd = *Tensor::Empty({n}, DType::kF32);
  auto loss = [&] {
    WEFT_CHECK_OK(ops.LayerNormForward(kCtx, out, mean, rstd, x, w, b, 1e-5f));
    return WeightedSum(out, r);
  };
  loss();
  Tensor dx = RandomTensor({n, c}, 9);  // overwritten without a residual
  Tensor dw = *Tensor::Zeros({c}, DType::kF32), db = *Tensor::Zeros({c}, DType::kF32);
  ASSERT_TRUE(ops.LayerNormBackward(kCtx, dx, dw, db, r, x, w, mean, rstd, Tensor()).ok());
  EXPECT_LT(RelativeError(Values(dx), NumericalGradient(x, loss, 1e-3f)), 1e-2);
  EXPECT_LT(RelativeError(Values(dw), NumericalGradient(w, loss, 1e-3f)), 1e-2);
  EXPECT_LT(RelativeError(Values(db), NumericalGradient(b, loss, 1e-3f)), 1e-2);

  // dx as its own residual adds onto what is there.
  Tensor dx2 = *Tensor::FromFloats(Values(dx), {n, c});
  ASSERT_TRUE(ops.LayerNormBackward(kCtx, dx2, dw, db, r, x, w, mean, rstd, dx2).ok());
  for (int i = 0; i < n * c; ++i) EXPECT_NEAR(dx2.data<float>()[i], 2 * dx.data<float>()[i], 1e-5);

  // Another residual is read, never written: dx3 = residual + dL/dx.
  Tensor residual = RandomTensor({n, c}, 10);
  const std::vector<float> residual_before = Values(residual);
  Tensor dx3 = RandomTensor({n, c}, 11);
  ASSERT_TRUE(ops.LayerNormBackward(kCtx, dx3, dw, db, r, x, w, mean, rstd, residual).ok());
  EXPECT_EQ(Values(residual), residual_before);
  for (int i = 0; i < n * c; ++i) {
    EXPECT_EQ(dx3.data<float>()[i], residual_before[i] + dx.data<float>()[i]) << i;
  }
}

TEST(LayerNormTest, BackwardResidualOfWrongSizeIsAnError) {
  CpuKernelOps ops;
  Tensor x = RandomTensor({2, 8}, 1), w = RandomTensor({8}, 2), dy = RandomTensor({2, 8}, 3);
  Tensor mean = *Tensor::Zeros({2}, DType::kF32), rstd = *Tensor::Zeros({2}, DType::kF32);
  Tensor dx = *Tensor::Empty({2, 8}, DType::kF32);
  Tensor dw = *Tensor::Zeros({8}, DType::kF32), db = *Tensor::Zeros({8}, DType::kF32);
  const absl::Status st = ops.LayerNormBackward(kCtx, dx, dw, db, dy, x, w, mean, rstd,
                                                RandomTensor({2, 7}, 4));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("residual"), std::string::npos) << st;
}

TEST(LayerNormTest, ResidualFusedMatchesAddThenNorm) {
  CpuKernelOps ops;
  Tensor a = RandomTensor({2, 3, 8}, 1), b = RandomTensor({2, 3, 8}, 2);
  Tensor w = RandomTensor({8}, 3), bias = RandomTensor({8}, 4);
  Tensor res = *Tensor::Empty({2, 3, 8}, DType::kF32), out = *Tensor::Empty({2, 3, 8}, DType::kF32);
  Tensor mean = *Tensor::Empty({6}, DType::kF32), rstd = *Tensor::Empty({6}, DType::kF32);
  ASSERT_TRUE(ops.ResidualLayerNormForward(kCtx, res, out, mean, rstd, a, b, w, bias, 1e-5f).ok());
  Tensor sum = *Tensor::Empty({2, 3, 8}, DType::kF32), out2 = *Tensor::Empty({2, 3, 8}, DType::kF32);
  ASSERT_TRUE(ops.Add(kCtx, sum, a, b).ok());
  ASSERT_TRUE(ops.LayerNormForward(kCtx, out2, mean, rstd, sum, w, bias, 1e-5f).ok());
  EXPECT_EQ(Values(res), Values(sum));
  EXPECT_EQ(Values(out), Values(out2));
}

TEST(LayerNormTest, WrongWeightShapeIsAnError) {
  CpuKernelOps ops;
  Tensor x = RandomTensor({2, 8}, 1), w = RandomTensor({7}, 2), b = RandomTensor({8}, 3);
  Tensor out = *Tensor::Empty({2, 8}, DType::kF32);
  Tensor mean = *Tensor::Empty({2}, DType::kF32), rstd = *Tensor::Empty({2}, DType::kF32);
  absl::Status s = ops.LayerNormForward(kCtx, out, mean, rstd, x, w, b, 1e-5f);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("weight"), std::string::npos);
}

}  // namespace
}  // namespace weft::cpu
