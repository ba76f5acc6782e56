// The Llama layers' CPU kernels (rmsnorm.cc, swiglu.cc, rope.cc): values
// against double references, gradients against finite differences, and the
// same bits for any thread count.
#include <cmath>
#include <vector>

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
Tensor none;  // residual_out when nothing is added

Tensor Empty(Shape s) { return *Tensor::Empty(std::move(s), DType::kF32); }
Tensor Zeros(Shape s) { return *Tensor::Zeros(std::move(s), DType::kF32); }

TEST(RmsNormTest, MatchesDoubleReference) {
  CpuKernelOps ops;
  const int64_t n = 5, c = 37;
  Tensor x = RandomTensor({n, c}, 1, 3.f), w = RandomTensor({c}, 2);
  Tensor out = Empty({n, c}), rstd = Empty({n});
  ASSERT_TRUE(ops.RmsNormForward(kCtx, none, out, rstd, x, Tensor(), w, 1e-6f).ok());
  for (int64_t r = 0; r < n; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < c; ++i) ss += std::pow(double(x.data<float>()[r * c + i]), 2);
    const double s = 1 / std::sqrt(ss / c + 1e-6);
    EXPECT_NEAR(rstd.data<float>()[r], s, 1e-5 * s);
    for (int64_t i = 0; i < c; ++i) {
      EXPECT_NEAR(out.data<float>()[r * c + i], x.data<float>()[r * c + i] * s * w.data<float>()[i],
                  1e-5);
    }
  }
}

TEST(RmsNormTest, FusedResidualEqualsAddThenNorm) {
  CpuKernelOps ops;
  const int64_t n = 4, c = 24;
  Tensor a = RandomTensor({n, c}, 1), b = RandomTensor({n, c}, 2), w = RandomTensor({c}, 3);
  Tensor res = Empty({n, c}), out = Empty({n, c}), rstd = Empty({n});
  ASSERT_TRUE(ops.RmsNormForward(kCtx, res, out, rstd, a, b, w, 1e-5f).ok());
  Tensor sum = Empty({n, c});
  ASSERT_TRUE(ops.Add(kCtx, sum, a, b).ok());
  Tensor out2 = Empty({n, c}), rstd2 = Empty({n});
  ASSERT_TRUE(ops.RmsNormForward(kCtx, none, out2, rstd2, sum, Tensor(), w, 1e-5f).ok());
  EXPECT_EQ(Values(res), Values(sum));
  EXPECT_EQ(Values(out), Values(out2));
}

TEST(RmsNormTest, BackwardMatchesFiniteDifferences) {
  CpuKernelOps ops;
  const int64_t n = 4, c = 12;
  Tensor x = RandomTensor({n, c}, 1), w = RandomTensor({c}, 2), r = RandomTensor({n, c}, 4);
  Tensor out = Empty({n, c}), rstd = Empty({n});
  auto loss = [&] {
    WEFT_CHECK_OK(ops.RmsNormForward(kCtx, none, out, rstd, x, Tensor(), w, 1e-5f));
    return WeightedSum(out, r);
  };
  loss();
  Tensor dx = RandomTensor({n, c}, 9), dw = Zeros({c});
  ASSERT_TRUE(ops.RmsNormBackward(kCtx, dx, dw, r, x, w, rstd, Tensor()).ok());
  EXPECT_LT(RelativeError(Values(dx), NumericalGradient(x, loss, 1e-3f)), 1e-2);
  EXPECT_LT(RelativeError(Values(dw), NumericalGradient(w, loss, 1e-3f)), 1e-2);
  // dx as its own residual adds onto itself; dweight accumulates.
  Tensor dx2 = *Tensor::FromFloats(Values(dx), {n, c});
  const std::vector<float> dw1 = Values(dw);
  ASSERT_TRUE(ops.RmsNormBackward(kCtx, dx2, dw, r, x, w, rstd, dx2).ok());
  for (int i = 0; i < n * c; ++i) EXPECT_NEAR(dx2.data<float>()[i], 2 * dx.data<float>()[i], 1e-5);
  for (int i = 0; i < c; ++i) EXPECT_NEAR(dw.data<float>()[i], 2 * dw1[i], 1e-5);
}

TEST(SwiGluTest, ForwardAndBackward) {
  CpuKernelOps ops;
  const int64_t n = 3, h = 7;
  Tensor gu = RandomTensor({n, 2 * h}, 1, 3.f), r = RandomTensor({n, h}, 2);
  Tensor out = Empty({n, h});
  auto loss = [&] {
    WEFT_CHECK_OK(ops.SwiGluForward(kCtx, out, gu));
    return WeightedSum(out, r);
  };
  loss();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < h; ++j) {
      const double g = gu.data<float>()[i * 2 * h + j], u = gu.data<float>()[i * 2 * h + h + j];
      EXPECT_NEAR(out.data<float>()[i * h + j], g / (1 + std::exp(-g)) * u, 1e-5);
    }
  }
  Tensor dgu = Empty({n, 2 * h});
  ASSERT_TRUE(ops.SwiGluBackward(kCtx, dgu, r, gu).ok());
  EXPECT_LT(RelativeError(Values(dgu), NumericalGradient(gu, loss, 1e-3f)), 1e-2);
}

// A rope table for head size d and `positions` rows.
Tensor Table(int64_t positions, int64_t d) {
  std::vector<float> t(positions * d);
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double a = p * std::pow(10000.0, -2.0 * i / d);
      t[p * d + i] = std::cos(a);
      t[p * d + d / 2 + i] = std::sin(a);
    }
  }
  return *Tensor::FromFloats(t, {positions, d});
}

TEST(RopeQkvTest, RotatesAndRepeatsGroups) {
  CpuKernelOps ops;
  const int64_t b = 2, t = 3, d = 4, heads = 4, kv = 2;
  Tensor q = RandomTensor({b, t, heads * d}, 1), k = RandomTensor({b, t, kv * d}, 2);
  Tensor v = RandomTensor({b, t, kv * d}, 3), rope = Table(16, d);
  Tensor qkv = Empty({b, t, 3 * heads * d});
  const TokenChunks pos = TokenChunks::Contiguous(t, 5);
  ASSERT_TRUE(ops.RopeQkvForward(kCtx, qkv, q, k, v, rope, pos).ok());
  const float* o = qkv.data<float>();
  for (int64_t bt = 0; bt < b * t; ++bt) {
    const int64_t p = 5 + bt % t;
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < d / 2; ++i) {
        const double a = p * std::pow(10000.0, -2.0 * i / d);
        const float* qh = q.data<float>() + bt * heads * d + h * d;
        const float* kh = k.data<float>() + bt * kv * d + (h / 2) * d;
        const float* row = o + bt * 3 * heads * d;
        EXPECT_NEAR(row[h * d + i], qh[i] * std::cos(a) - qh[i + 2] * std::sin(a), 1e-5);
        EXPECT_NEAR(row[h * d + i + 2], qh[i + 2] * std::cos(a) + qh[i] * std::sin(a), 1e-5);
        EXPECT_NEAR(row[heads * d + h * d + i], kh[i] * std::cos(a) - kh[i + 2] * std::sin(a), 1e-5);
        EXPECT_EQ(row[2 * heads * d + h * d + i],
                  v.data<float>()[bt * kv * d + (h / 2) * d + i]);
      }
    }
  }
}

TEST(RopeQkvTest, BackwardIsTheTranspose) {
  CpuKernelOps ops;
  const int64_t b = 1, t = 6, d = 8, heads = 6, kv = 2;
  Tensor q = RandomTensor({b, t, heads * d}, 1), k = RandomTensor({b, t, kv * d}, 2);
  Tensor v = RandomTensor({b, t, kv * d}, 3), rope = Table(32, d);
  Tensor r = RandomTensor({b, t, 3 * heads * d}, 4), qkv = Empty({b, t, 3 * heads * d});
  TokenChunks pos;  // two chunks, as a context-parallel rank holds them
  pos.chunk_len = 3;
  pos.count = 2;
  pos.offsets[0] = 0;
  pos.offsets[1] = 20;
  auto loss = [&] {
    WEFT_CHECK_OK(ops.RopeQkvForward(kCtx, qkv, q, k, v, rope, pos));
    return WeightedSum(qkv, r);
  };
  loss();
  Tensor dq = Empty(q.shape()), dk = Empty(k.shape()), dv = Empty(v.shape());
  ASSERT_TRUE(ops.RopeQkvBackward(kCtx, dq, dk, dv, r, rope, pos).ok());
  EXPECT_LT(RelativeError(Values(dq), NumericalGradient(q, loss, 1e-3f)), 1e-3);
  EXPECT_LT(RelativeError(Values(dk), NumericalGradient(k, loss, 1e-3f)), 1e-3);
  EXPECT_LT(RelativeError(Values(dv), NumericalGradient(v, loss, 1e-3f)), 1e-3);
}

TEST(RopeQkvTest, RefusesPositionsPastTheTable) {
  CpuKernelOps ops;
  Tensor q = RandomTensor({1, 4, 8}, 1), k = RandomTensor({1, 4, 8}, 2), v = RandomTensor({1, 4, 8}, 3);
  Tensor qkv = Empty({1, 4, 24});
  const absl::Status s =
      ops.RopeQkvForward(kCtx, qkv, q, k, v, Table(6, 8), TokenChunks::Contiguous(4, 3));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("position 6"), std::string::npos) << s;
}

TEST(LlamaLayersTest, SameBitsForAnyThreadCount) {
  CpuKernelOps ops;
  const int64_t n = 64, c = 96;
  Tensor x = RandomTensor({n, c}, 1), w = RandomTensor({c}, 2), dy = RandomTensor({n, c}, 3);
  auto run = [&](int threads) {
    SetKernelThreads(threads);
    Tensor out = Empty({n, c}), rstd = Empty({n}), dx = Empty({n, c}), dw = Zeros({c});
    WEFT_CHECK_OK(ops.RmsNormForward(kCtx, none, out, rstd, x, Tensor(), w, 1e-5f));
    WEFT_CHECK_OK(ops.RmsNormBackward(kCtx, dx, dw, dy, x, w, rstd, Tensor()));
    Tensor s = Empty({n, c / 2}), ds = Empty({n, c});
    WEFT_CHECK_OK(ops.SwiGluForward(kCtx, s, x));
    WEFT_CHECK_OK(ops.SwiGluBackward(kCtx, ds, s, x));
    std::vector<float> all = Values(out);
    for (const Tensor* t : {&dx, &dw, &s, &ds}) {
      const std::vector<float> v = Values(*t);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  const std::vector<float> one = run(1);
  EXPECT_EQ(run(2), one);
  EXPECT_EQ(run(3), one);
  SetKernelThreads(1);
}

}  // namespace
}  // namespace weft::cpu
