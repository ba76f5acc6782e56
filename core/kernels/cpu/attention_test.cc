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

TEST(AttentionTest, FirstPositionAttendsOnlyToItself) {
  CpuKernelOps ops;
  const int64_t b = 1, t = 4, c = 4, nh = 2;
  Tensor qkv = RandomTensor({b, t, 3 * c}, 1);
  Tensor out = *Tensor::Empty({b, t, c}, DType::kF32), lse = *Tensor::Empty({b, nh, t}, DType::kF32);
  ASSERT_TRUE(ops.AttentionForward(kCtx, out, lse, qkv, nh).ok());
  for (int e = 0; e < c; ++e) EXPECT_FLOAT_EQ(out.data<float>()[e], qkv.data<float>()[2 * c + e]);
}

TEST(AttentionTest, FutureTokensDoNotChangeThePast) {
  CpuKernelOps ops;
  const int64_t b = 1, t = 5, c = 6, nh = 3;
  Tensor qkv = RandomTensor({b, t, 3 * c}, 1);
  Tensor out = *Tensor::Empty({b, t, c}, DType::kF32), lse = *Tensor::Empty({b, nh, t}, DType::kF32);
  ASSERT_TRUE(ops.AttentionForward(kCtx, out, lse, qkv, nh).ok());
  std::vector<float> before = Values(out);
  for (int e = 0; e < 3 * c; ++e) qkv.data<float>()[(t - 1) * 3 * c + e] += 1.f;  // last token
  ASSERT_TRUE(ops.AttentionForward(kCtx, out, lse, qkv, nh).ok());
  for (int i = 0; i < (t - 1) * c; ++i) EXPECT_EQ(out.data<float>()[i], before[i]);
}

TEST(AttentionTest, BackwardMatchesFiniteDifferences) {
  CpuKernelOps ops;
  const int64_t b = 2, t = 5, c = 8, nh = 2;
  Tensor qkv = RandomTensor({b, t, 3 * c}, 1), r = RandomTensor({b, t, c}, 2);
  Tensor out = *Tensor::Empty({b, t, c}, DType::kF32), lse = *Tensor::Empty({b, nh, t}, DType::kF32);
  auto loss = [&] {
    WEFT_CHECK_OK(ops.AttentionForward(kCtx, out, lse, qkv, nh));
    return WeightedSum(out, r);
  };
  loss();
  Tensor dqkv = *Tensor::Empty({b, t, 3 * c}, DType::kF32);
  ASSERT_TRUE(ops.AttentionBackward(kCtx, dqkv, r, qkv, out, lse, nh).ok());
  EXPECT_LT(RelativeError(Values(dqkv), NumericalGradient(qkv, loss, 1e-3f)), 1e-2);
}

TEST(AttentionTest, HeadsMustDivideChannels) {
  CpuKernelOps ops;
  Tensor qkv = RandomTensor({1, 2, 3 * 6}, 1);
  Tensor out = *Tensor::Empty({1, 2, 6}, DType::kF32), lse = *Tensor::Empty({1, 4, 2}, DType::kF32);
  EXPECT_EQ(ops.AttentionForward(kCtx, out, lse, qkv, 4).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace weft::cpu
