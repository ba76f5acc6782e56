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

TEST(EmbeddingTest, BackwardMatchesFiniteDifferencesWithRepeatedTokens) {
  CpuKernelOps ops;
  const int64_t b = 2, t = 3, c = 4, v = 5;
  Tensor tokens = *Tensor::FromVector<int32_t>(std::vector<int32_t>{1, 3, 1, 0, 4, 1}, {b, t});
  Tensor wte = RandomTensor({v, c}, 1), wpe = RandomTensor({8, c}, 2);
  Tensor r = RandomTensor({b, t, c}, 3);
  Tensor out = *Tensor::Empty({b, t, c}, DType::kF32);
  auto loss = [&] {
    WEFT_CHECK_OK(ops.EmbeddingForward(kCtx, out, tokens, wte, wpe));
    return WeightedSum(out, r);
  };
  loss();
  EXPECT_FLOAT_EQ(out.data<float>()[0], wte.data<float>()[1 * c] + wpe.data<float>()[0]);
  Tensor dwte = *Tensor::Zeros({v, c}, DType::kF32), dwpe = *Tensor::Zeros({8, c}, DType::kF32);
  ASSERT_TRUE(ops.EmbeddingBackward(kCtx, dwte, dwpe, r, tokens).ok());
  EXPECT_LT(RelativeError(Values(dwte), NumericalGradient(wte, loss)), 1e-4);
  EXPECT_LT(RelativeError(Values(dwpe), NumericalGradient(wpe, loss)), 1e-4);
}

TEST(EmbeddingTest, OutOfRangeTokenIsAnError) {
  CpuKernelOps ops;
  Tensor tokens = *Tensor::FromVector<int32_t>(std::vector<int32_t>{0, 7}, {1, 2});
  Tensor wte = RandomTensor({5, 4}, 1), wpe = RandomTensor({8, 4}, 2);
  Tensor out = *Tensor::Empty({1, 2, 4}, DType::kF32);
  absl::Status s = ops.EmbeddingForward(kCtx, out, tokens, wte, wpe);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("token id 7"), std::string::npos);
}

TEST(EmbeddingTest, SequenceLongerThanPositionTableIsAnError) {
  CpuKernelOps ops;
  Tensor tokens = *Tensor::FromVector<int32_t>(std::vector<int32_t>{0, 1, 2}, {1, 3});
  Tensor wte = RandomTensor({5, 4}, 1), wpe = RandomTensor({2, 4}, 2);
  Tensor out = *Tensor::Empty({1, 3, 4}, DType::kF32);
  EXPECT_NE(ops.EmbeddingForward(kCtx, out, tokens, wte, wpe).message().find("max_seq_len"),
            std::string::npos);
}

}  // namespace
}  // namespace weft::cpu
