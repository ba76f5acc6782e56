#include "gtest/gtest.h"
#include "core/kernels/cpu/cpu_ops.h"
#include "core/kernels/cpu/thread_pool.h"
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
  ASSERT_TRUE(ops.DropoutForward(kCtx, full, x, 0.25f, {.seed = 7}).ok());
  // The second half computed alone at offset n/2 equals the tail of the full run.
  Tensor half_in = testing::FilledTensor({n / 2}, 1.f);
  Tensor half = *Tensor::Empty({n / 2}, DType::kF32);
  ASSERT_TRUE(ops.DropoutForward(kCtx, half, half_in, 0.25f, {.seed = 7, .offset = n / 2}).ok());
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
  ASSERT_TRUE(ops.DropoutBackward(kCtx, dx, x, 0.25f, {.seed = 7}).ok());
  EXPECT_EQ(Values(dx), Values(full));
}

// Element e of row b of a (rows, cols) launch draws from global sample
// first + stride * b: a split of the rows into launches, and any offset
// into the tensor, draw the same masks as one launch.
TEST(DropoutTest, MaskFollowsEachRowsSampleInTheGlobalBatch) {
  CpuKernelOps ops;
  const int rows = 6, cols = 37;
  const DropoutKey whole{.seed = 11, .sample_size = cols, .first_sample = 1, .sample_stride = 3};
  Tensor x = testing::FilledTensor({rows, cols}, 1.f);
  Tensor full = *Tensor::Empty({rows, cols}, DType::kF32);
  ASSERT_TRUE(ops.DropoutForward(kCtx, full, x, 0.5f, whole).ok());
  int kept = 0;
  for (int b = 0; b < rows; ++b) {
    for (int e = 0; e < cols; ++e) {
      const bool keep = DropoutKeepAt(11, 1 + 3 * b, e, 0.5f);
      ASSERT_EQ(full.data<float>()[b * cols + e], keep ? 2.f : 0.f) << b << "," << e;
      kept += keep;
    }
  }
  EXPECT_GT(kept, rows * cols / 4);
  EXPECT_LT(kept, rows * cols * 3 / 4);
  // Rows 2.. as their own micro-batch (samples 7, 10, ...), and a launch
  // starting mid-row.
  Tensor tail = *Tensor::Empty({rows - 2, cols}, DType::kF32);
  ASSERT_TRUE(ops.DropoutForward(kCtx, tail, x.Slice(0, 2, rows), 0.5f,
                                 {.seed = 11, .sample_size = cols, .first_sample = 7,
                                  .sample_stride = 3})
                  .ok());
  const int start = 2 * cols + 5, n = rows * cols - start;
  Tensor piece = *Tensor::Empty({n}, DType::kF32);
  DropoutKey mid = whole;
  mid.offset = start;
  ASSERT_TRUE(ops.DropoutForward(kCtx, piece, x.View({rows * cols}).Slice(0, start, rows * cols),
                                 0.5f, mid)
                  .ok());
  for (int i = 0; i < (rows - 2) * cols; ++i) {
    ASSERT_EQ(tail.data<float>()[i], full.data<float>()[2 * cols + i]) << i;
  }
  for (int i = 0; i < n; ++i) ASSERT_EQ(piece.data<float>()[i], full.data<float>()[start + i]) << i;
}

TEST(DropoutTest, InvalidProbabilityIsAnError) {
  CpuKernelOps ops;
  Tensor x = testing::FilledTensor({4}, 1.f), out = *Tensor::Empty({4}, DType::kF32);
  EXPECT_FALSE(ops.DropoutForward(kCtx, out, x, 1.0f, {.seed = 1}).ok());
  EXPECT_FALSE(ops.DropoutForward(kCtx, out, x, -0.1f, {.seed = 1}).ok());
}

// Dropout runs on the kernel thread pool, each thread with its own cursor
// starting mid-sample: any thread count draws the one-launch mask exactly.
TEST(DropoutTest, ThreadCountDoesNotChangeTheMask) {
  CpuKernelOps ops;
  const int rows = 7, cols = 10007;  // chunk ends fall inside samples and Philox blocks
  const DropoutKey key{.seed = 5, .sample_size = cols, .first_sample = 2, .sample_stride = 4};
  Tensor x = RandomTensor({rows, cols}, 9);
  const int threads_before = KernelThreads();
  std::vector<std::vector<float>> outs;
  for (int threads : {1, 3, 4}) {
    SetKernelThreads(threads);
    Tensor out = *Tensor::Empty({rows, cols}, DType::kF32);
    ASSERT_TRUE(ops.DropoutForward(kCtx, out, x, 0.3f, key).ok());
    outs.push_back(Values(out));
  }
  SetKernelThreads(threads_before);
  EXPECT_EQ(outs[1], outs[0]);
  EXPECT_EQ(outs[2], outs[0]);
  const std::vector<float> in = Values(x);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const bool keep = DropoutKeep(key, i, 0.3f);
    ASSERT_EQ(outs[2][i], keep ? in[i] * (1.0f / 0.7f) : 0.f) << i;
  }
}

}  // namespace
}  // namespace weft::cpu
