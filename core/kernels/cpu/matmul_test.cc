#include "gtest/gtest.h"
#include "core/kernels/cpu/cpu_ops.h"
#include "core/kernels/cpu/gelu_math.h"
#include "core/testing/grad_check.h"

namespace weft::cpu {
namespace {

using ::weft::testing::NumericalGradient;
using ::weft::testing::RandomTensor;
using ::weft::testing::RelativeError;
using ::weft::testing::Values;
using ::weft::testing::WeightedSum;

const KernelContext kCtx{Device::Cpu()};

// Naive op(a) . op(b) for checking every transpose combination.
std::vector<float> Naive(const Tensor& a, bool ta, const Tensor& b, bool tb) {
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  const int64_t n = tb ? b.dim(0) : b.dim(1);
  std::vector<float> out(m * n, 0.f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) {
        const float av = ta ? a.data<float>()[p * m + i] : a.data<float>()[i * k + p];
        const float bv = tb ? b.data<float>()[j * k + p] : b.data<float>()[p * n + j];
        out[i * n + j] += av * bv;
      }
  return out;
}

TEST(GemmTest, AllTransposeCombinations) {
  CpuKernelOps ops;
  const int64_t m = 5, k = 7, n = 3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a = RandomTensor(ta ? Shape{k, m} : Shape{m, k}, 1);
      Tensor b = RandomTensor(tb ? Shape{n, k} : Shape{k, n}, 2);
      Tensor out = *Tensor::Empty({m, n}, DType::kF32);
      GemmArgs g{.out = out, .a = a, .b = b, .trans_a = ta, .trans_b = tb};
      ASSERT_TRUE(ops.Gemm(kCtx, g).ok());
      EXPECT_LT(RelativeError(Values(out), Naive(a, ta, b, tb)), 1e-6) << ta << tb;
    }
  }
}

TEST(GemmTest, AccumulateAddsToOutput) {
  CpuKernelOps ops;
  Tensor a = RandomTensor({4, 3}, 1), b = RandomTensor({3, 2}, 2);
  Tensor out = RandomTensor({4, 2}, 3);
  std::vector<float> expect = Naive(a, false, b, false);
  for (int i = 0; i < 8; ++i) expect[i] += out.data<float>()[i];
  ASSERT_TRUE(ops.Gemm(kCtx, {.out = out, .a = a, .b = b, .accumulate = true}).ok());
  EXPECT_LT(RelativeError(Values(out), expect), 1e-6);
}

// An empty inner dimension is a valid GEMM: out = 0 (or unchanged when
// accumulating). Host tensors made from an empty vector must be accepted;
// the CUDA parity test found they were not.
TEST(GemmTest, EmptyInnerDimensionFromHostVectors) {
  CpuKernelOps ops;
  for (bool accumulate : {false, true}) {
    Tensor a = *Tensor::FromFloats({}, {4, 0}, DType::kF32);
    Tensor b = *Tensor::FromFloats({}, {0, 8}, DType::kF32);
    Tensor out = *Tensor::FromFloats(std::vector<float>(32, 2.f), {4, 8}, DType::kF32);
    GemmArgs g{.out = out, .a = a, .b = b, .accumulate = accumulate};
    const absl::Status st = ops.Gemm(kCtx, g);
    ASSERT_TRUE(st.ok()) << st;
    for (float v : Values(out)) EXPECT_EQ(v, accumulate ? 2.f : 0.f);
  }
}

TEST(GemmTest, ShapeMismatchIsAnError) {
  CpuKernelOps ops;
  Tensor a = RandomTensor({4, 3}, 1), b = RandomTensor({4, 2}, 2);
  Tensor out = *Tensor::Empty({4, 2}, DType::kF32);
  absl::Status s = ops.Gemm(kCtx, {.out = out, .a = a, .b = b});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

// Linear + GELU layer built from the epilogues: y = gelu(x w^T + b). Its
// backward (DGELU epilogue, then dx / dw / db GEMMs) must match finite
// differences.
TEST(GemmTest, BiasGeluForwardAndDGeluBackwardMatchFiniteDifferences) {
  CpuKernelOps ops;
  const int64_t m = 4, k = 5, n = 6;
  Tensor x = RandomTensor({m, k}, 1), w = RandomTensor({n, k}, 2), bias = RandomTensor({n}, 3);
  Tensor r = RandomTensor({m, n}, 4);  // dL/dy
  auto forward = [&](Tensor& y, Tensor& pre) {
    GemmArgs g{.out = y, .a = x, .b = w, .trans_b = true, .epilogue = Epilogue::kBiasGelu,
               .bias = bias, .aux = pre};
    WEFT_CHECK_OK(ops.Gemm(kCtx, g));
  };
  Tensor y = *Tensor::Empty({m, n}, DType::kF32), pre = *Tensor::Empty({m, n}, DType::kF32);
  forward(y, pre);
  for (int i = 0; i < m * n; ++i) {
    EXPECT_NEAR(y.data<float>()[i], Gelu(pre.data<float>()[i]), 1e-6);
  }
  // dpre = r * gelu'(pre) via the kDGelu epilogue on an identity product.
  Tensor eye = *Tensor::Zeros({n, n}, DType::kF32);
  for (int i = 0; i < n; ++i) eye.data<float>()[i * n + i] = 1;
  Tensor dpre = *Tensor::Empty({m, n}, DType::kF32);
  Tensor db = *Tensor::Zeros({n}, DType::kF32);
  ASSERT_TRUE(ops.Gemm(kCtx, {.out = dpre, .a = r, .b = eye, .epilogue = Epilogue::kDGelu,
                              .aux = pre, .bias_grad = db})
                  .ok());
  Tensor dx = *Tensor::Empty({m, k}, DType::kF32);
  Tensor dw = *Tensor::Zeros({n, k}, DType::kF32);
  ASSERT_TRUE(ops.Gemm(kCtx, {.out = dx, .a = dpre, .b = w}).ok());
  ASSERT_TRUE(ops.Gemm(kCtx, {.out = dw, .a = dpre, .b = x, .trans_a = true,
                              .accumulate = true})
                  .ok());
  auto loss = [&] {
    Tensor yy = *Tensor::Empty({m, n}, DType::kF32), pp = *Tensor::Empty({m, n}, DType::kF32);
    forward(yy, pp);
    return WeightedSum(yy, r);
  };
  EXPECT_LT(RelativeError(Values(dx), NumericalGradient(x, loss)), 1e-2);
  EXPECT_LT(RelativeError(Values(dw), NumericalGradient(w, loss)), 1e-2);
  EXPECT_LT(RelativeError(Values(db), NumericalGradient(bias, loss)), 1e-2);
}

TEST(GemmTest, ColumnSumsOfAOnlyBesideAWeightGradient) {
  CpuKernelOps ops;
  Tensor a = RandomTensor({3, 4}, 1), b = RandomTensor({3, 2}, 2);
  Tensor out = *Tensor::Zeros({4, 2}, DType::kF32);
  Tensor sums = *Tensor::Zeros({4}, DType::kF32);
  GemmArgs g{.out = out, .a = a, .b = b, .trans_a = true};
  g.a_col_sums = sums;
  ASSERT_TRUE(ops.Gemm(kCtx, g).ok());
  const float* av = a.data<float>();
  EXPECT_FLOAT_EQ(sums.data<float>()[1], av[1] + av[5] + av[9]);
  // Without trans_a the sums would be over a's rows: refused, as is a
  // length other than M and an epilogue beside them.
  Tensor a2 = RandomTensor({4, 3}, 3);
  GemmArgs plain{.out = out, .a = a2, .b = b};
  plain.a_col_sums = sums;
  absl::Status s = ops.Gemm(kCtx, plain);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("a_col_sums"), std::string::npos) << s;
  g.a_col_sums = *Tensor::Zeros({3}, DType::kF32);
  s = ops.Gemm(kCtx, g);
  EXPECT_NE(s.message().find("M = 4"), std::string::npos) << s;
  g.a_col_sums = sums;
  g.epilogue = Epilogue::kBias;
  g.bias = *Tensor::Zeros({2}, DType::kF32);
  EXPECT_FALSE(ops.Gemm(kCtx, g).ok());
}

TEST(GemmTest, BiasGradAccumulates) {
  CpuKernelOps ops;
  Tensor dy = RandomTensor({3, 2}, 1);
  Tensor db = *Tensor::FromFloats({1.f, 2.f}, {2});
  ASSERT_TRUE(ops.BiasGrad(kCtx, db, dy).ok());
  const float* g = dy.data<float>();
  EXPECT_FLOAT_EQ(db.data<float>()[0], 1.f + g[0] + g[2] + g[4]);
  EXPECT_FLOAT_EQ(db.data<float>()[1], 2.f + g[1] + g[3] + g[5]);
}

}  // namespace
}  // namespace weft::cpu
