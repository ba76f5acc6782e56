// The CPU mixture-of-experts kernels: top-k selection and gates, the
// permutation and its inverse, the router's backward against finite
// differences, and the grouped GEMM against one GEMM per group.
#include <cmath>
#include <vector>

#include "core/kernels/grouped_gemm.h"
#include "core/kernels/moe_ops.h"
#include "core/testing/grad_check.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

using ::weft::testing::NumericalGradient;
using ::weft::testing::RandomTensor;
using ::weft::testing::RelativeError;
using ::weft::testing::Values;

const KernelContext kCtx{Device::Cpu(), nullptr};

MoeKernelOps& Ops() { return **GetMoeKernelOps(DeviceType::kCPU); }

Tensor F32(Shape s) { return *Tensor::Zeros(std::move(s), DType::kF32); }
Tensor I32(std::vector<int32_t> v, Shape s) { return *Tensor::FromVector<int32_t>(v, s); }

struct Routed {
  Tensor probs, lse, idx, gates;
};

// Softmax scores, gates renormalised for k > 1 (GPT's router).
RouterSpec Spec(int k) { return {.k = k, .normalize = k > 1}; }

Routed Route(const Tensor& logits, const RouterSpec& spec) {
  const int64_t n = logits.dim(0), e = logits.dim(1);
  const int k = spec.k;
  Routed r{F32({n, e}), F32({n}), *Tensor::Zeros({n, k}, DType::kI32), F32({n, k})};
  EXPECT_TRUE(Ops().RouterTopK(kCtx, r.probs, r.lse, r.idx, r.gates, logits, spec).ok());
  return r;
}
Routed Route(const Tensor& logits, int k) { return Route(logits, Spec(k)); }

TEST(MoeKernelsTest, TopTwoPicksLargestAndRenormalises) {
  Tensor logits = *Tensor::FromFloats({0.f, 2.f, 1.f, 2.f, /*row 2*/ 3.f, 0.f, 0.f, 1.f}, {2, 4});
  Routed r = Route(logits, 2);
  // Row 0: a tie between experts 1 and 3 keeps the lower index first.
  EXPECT_EQ(*r.idx.ToVector<int32_t>(), (std::vector<int32_t>{1, 3, 0, 3}));
  std::vector<float> g = Values(r.gates);
  EXPECT_FLOAT_EQ(g[0], 0.5f);
  EXPECT_FLOAT_EQ(g[1], 0.5f);
  EXPECT_NEAR(g[2], std::exp(3.0) / (std::exp(3.0) + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(g[2] + g[3], 1.0f, 1e-6);
  const double z0 = 1 + 2 * std::exp(2.0) + std::exp(1.0);
  EXPECT_NEAR(Values(r.lse)[0], std::log(z0), 1e-5);
  EXPECT_NEAR(Values(r.probs)[1], std::exp(2.0) / z0, 1e-6);
}

TEST(MoeKernelsTest, TopOneGateIsTheRawProbability) {
  Tensor logits = *Tensor::FromFloats({0.f, 1.f, 0.f}, {1, 3});
  Routed r = Route(logits, 1);
  EXPECT_EQ(*r.idx.ToVector<int32_t>(), std::vector<int32_t>{1});
  EXPECT_NEAR(Values(r.gates)[0], std::exp(1.0) / (2 + std::exp(1.0)), 1e-6);
}

TEST(MoeKernelsTest, GatherThenCombineIsTheInversePermutation) {
  Tensor x = RandomTensor({3, 4}, 1);
  // Tokens 0..2 with k=2; token 1's second choice was dropped.
  Tensor slots = I32({1, 4, 2, -1, 0, 3}, {3, 2});
  Tensor assign = I32({4, 0, 2, 5, 1}, {5});  // the inverse of slots
  Tensor grouped = F32({5, 4});
  ASSERT_TRUE(Ops().GatherRows(kCtx, grouped, x, assign, 2, Tensor()).ok());
  Tensor weights = *Tensor::FromFloats({0.5f, 0.25f, 1.f, 9.f, 2.f, 3.f}, {3, 2});
  Tensor out = F32({3, 4});
  ASSERT_TRUE(Ops().CombineRows(kCtx, out, grouped, slots, weights, false).ok());
  std::vector<float> xv = Values(x), ov = Values(out);
  const float scale[3] = {0.75f, 1.f, 5.f};
  for (int t = 0; t < 3; ++t) {
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(ov[t * 4 + c], scale[t] * xv[t * 4 + c], 1e-6);
  }
  Tensor dots = F32({3, 2});
  ASSERT_TRUE(Ops().RowDots(kCtx, dots, x, grouped, slots).ok());
  double sq1 = 0;
  for (int c = 0; c < 4; ++c) sq1 += xv[4 + c] * xv[4 + c];
  EXPECT_NEAR(Values(dots)[2], sq1, 1e-5);
  EXPECT_EQ(Values(dots)[3], 0.f);
  // Weighted: row i gets its choice's weight.
  ASSERT_TRUE(Ops().GatherRows(kCtx, grouped, x, assign, 2, weights).ok());
  EXPECT_NEAR(Values(grouped)[0], 2.f * xv[8], 1e-6);
  EXPECT_NEAR(Values(grouped)[4], 0.5f * xv[0], 1e-6);
}

TEST(MoeKernelsTest, GatherRejectsOutOfRangeRows) {
  Tensor x = RandomTensor({2, 3}, 1);
  Tensor out = F32({1, 3});
  EXPECT_FALSE(Ops().GatherRows(kCtx, out, x, I32({2}, {1}), 1, Tensor()).ok());
}

TEST(MoeKernelsTest, TopFourOfEightKeepsOrderAndTies) {
  // Qwen3-MoE's shape: k = 4 of 8, renormalised or raw.
  Tensor logits = *Tensor::FromFloats({0.f, 3.f, 1.f, 3.f, -1.f, 2.f, 0.5f, 1.f}, {1, 8});
  Routed r = Route(logits, {.k = 4, .normalize = true});
  EXPECT_EQ(*r.idx.ToVector<int32_t>(), (std::vector<int32_t>{1, 3, 5, 2}));
  const std::vector<float> p = Values(r.probs), g = Values(r.gates);
  const double chosen = p[1] + p[3] + p[5] + p[2];
  EXPECT_NEAR(g[2], p[5] / chosen, 1e-6);
  EXPECT_NEAR(g[0] + g[1] + g[2] + g[3], 1.0, 1e-6);
  Routed raw = Route(logits, {.k = 4, .normalize = false});
  EXPECT_FLOAT_EQ(Values(raw.gates)[3], p[2]);
}

TEST(MoeKernelsTest, SigmoidScoresAreEachLogitsSigmoid) {
  Tensor logits = *Tensor::FromFloats({0.f, 2.f, -1.f, 1.f}, {1, 4});
  Routed r = Route(logits, {.k = 2, .score = RouterScore::kSigmoid, .normalize = true});
  EXPECT_EQ(*r.idx.ToVector<int32_t>(), (std::vector<int32_t>{1, 3}));
  const double s1 = 1 / (1 + std::exp(-2.0)), s3 = 1 / (1 + std::exp(-1.0));
  EXPECT_NEAR(Values(r.probs)[0], 0.5, 1e-6);
  EXPECT_NEAR(Values(r.probs)[1], s1, 1e-6);
  EXPECT_NEAR(Values(r.gates)[0], s1 / (s1 + s3), 1e-6);
}

// L = sum(gates * r) + sum(probs * extra) + lse_scale / 2 * sum(lse^2).
void CheckRouterBackward(const RouterSpec& spec) {
  const int64_t n = 5, e = spec.k > 2 ? 8 : 4;
  const int k = spec.k;
  // Sigmoid scores never pass through the logsumexp (no z-loss).
  const float lse_scale = spec.score == RouterScore::kSigmoid ? 0.0f : 0.3f;
  Tensor logits = RandomTensor({n, e}, 3, 2.0f);
  Tensor r = RandomTensor({n, k}, 4);
  Tensor extra = RandomTensor({n, e}, 5);
  auto loss = [&] {
    Routed o = Route(logits, spec);
    double l = 0;
    std::vector<float> g = Values(o.gates), rv = Values(r), p = Values(o.probs),
                       ev = Values(extra), ls = Values(o.lse);
    for (size_t i = 0; i < g.size(); ++i) l += static_cast<double>(g[i]) * rv[i];
    for (size_t i = 0; i < p.size(); ++i) l += static_cast<double>(p[i]) * ev[i];
    for (float v : ls) l += 0.5 * lse_scale * v * v;
    return l;
  };
  Routed o = Route(logits, spec);
  Tensor dlogits = F32({n, e});
  ASSERT_TRUE(Ops()
                  .RouterTopKBackward(kCtx, dlogits, r, o.probs, o.lse, o.idx, extra, lse_scale,
                                      spec)
                  .ok());
  EXPECT_LT(RelativeError(Values(dlogits), NumericalGradient(logits, loss, 1e-3f)), 1e-2);
}

TEST(MoeKernelsTest, RouterBackwardTopOne) { CheckRouterBackward(Spec(1)); }
TEST(MoeKernelsTest, RouterBackwardTopTwo) { CheckRouterBackward(Spec(2)); }
TEST(MoeKernelsTest, RouterBackwardTopFourRaw) { CheckRouterBackward({.k = 4, .normalize = false}); }
TEST(MoeKernelsTest, RouterBackwardTopFourNormalised) { CheckRouterBackward({.k = 4}); }
TEST(MoeKernelsTest, RouterBackwardSigmoid) {
  CheckRouterBackward({.k = 2, .score = RouterScore::kSigmoid, .normalize = true});
}

TEST(MoeKernelsTest, GroupedGemmMatchesOneGemmPerGroup) {
  KernelOps& ops = **GetKernelOps(DeviceType::kCPU);
  const std::vector<int64_t> counts = {2, 0, 3};
  Tensor a = RandomTensor({5, 4}, 1), w = RandomTensor({3, 6, 4}, 2), bias = RandomTensor({3, 6}, 3);
  Tensor out = F32({5, 6});
  ASSERT_TRUE(GroupedGemm(ops, kCtx,
                          {.kind = GroupedGemmKind::kForward, .out = out, .a = a, .w = w,
                           .epilogue = Epilogue::kBias, .bias = bias},
                          counts)
                  .ok());
  std::vector<float> av = Values(a), wv = Values(w), bv = Values(bias), ov = Values(out);
  const int group_of_row[5] = {0, 0, 2, 2, 2};
  for (int i = 0; i < 5; ++i) {
    const int g = group_of_row[i];
    for (int j = 0; j < 6; ++j) {
      double s = bv[g * 6 + j];
      for (int c = 0; c < 4; ++c) s += av[i * 4 + c] * wv[(g * 6 + j) * 4 + c];
      EXPECT_NEAR(ov[i * 6 + j], s, 1e-5) << i << "," << j;
    }
  }
  // The weight gradient of group 1 (no rows) stays untouched.
  Tensor dw = F32({3, 6, 4});
  ASSERT_TRUE(GroupedGemm(ops, kCtx,
                          {.kind = GroupedGemmKind::kWeightGrad, .out = dw, .a = out, .b = a},
                          counts)
                  .ok());
  std::vector<float> dwv = Values(dw);
  for (int i = 24; i < 48; ++i) EXPECT_EQ(dwv[i], 0.f);
  EXPECT_NE(dwv[0], 0.f);
}

TEST(MoeKernelsTest, GroupedGemmRejectsCountsThatDoNotCoverTheRows) {
  KernelOps& ops = **GetKernelOps(DeviceType::kCPU);
  Tensor a = RandomTensor({5, 4}, 1), w = RandomTensor({2, 6, 4}, 2), out = F32({5, 6});
  EXPECT_FALSE(GroupedGemm(ops, kCtx, {.out = out, .a = a, .w = w}, {2, 2}).ok());
}

}  // namespace
}  // namespace weft
