// FastCpuKernelOps against the reference CpuKernelOps.
//
// Tolerances: kernels whose summation order or exp differ from the reference
// (8-lane f32 accumulators instead of double, a polynomial expf with ~2 ulp
// error) must match to |fast - ref| <= 2e-5 * (1 + |ref|) on O(1) random
// inputs. GEMM epilogues (same sgemm, GELU through the polynomial tanh) and
// the bias grads / AdamW (the reference's arithmetic in its order) are held
// to 1e-5 and bitwise respectively. Every kernel must give bitwise-identical
// results for 1 and 3 pool threads.
#include "core/kernels/cpu/fast_ops.h"

#include <cmath>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "core/kernels/cpu/cpu_ops.h"
#include "core/kernels/cpu/thread_pool.h"
#include "core/testing/grad_check.h"

namespace weft::cpu {
namespace {

using ::weft::testing::RandomTensor;
using ::weft::testing::Values;

const KernelContext kCtx{Device::Cpu()};

Tensor Empty(Shape s) { return *Tensor::Empty(s, DType::kF32); }
Tensor Copy(const Tensor& t) {
  Tensor c = Empty(t.shape());
  std::copy(t.data<float>(), t.data<float>() + t.numel(), c.data<float>());
  return c;
}

void ExpectClose(const Tensor& fast, const Tensor& ref, double tol, const char* what) {
  std::vector<float> f = Values(fast), r = Values(ref);
  ASSERT_EQ(f.size(), r.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    worst = std::max(worst, std::abs(double(f[i]) - r[i]) / (1.0 + std::abs(double(r[i]))));
  }
  EXPECT_LE(worst, tol) << what;
}

void ExpectBitwise(const Tensor& a, const Tensor& b, const char* what) {
  std::vector<float> x = Values(a), y = Values(b);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], y[i]) << what << " at " << i;
}

class FastOpsTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { SetKernelThreads(GetParam()); }
  FastCpuKernelOps fast_;
  CpuKernelOps ref_;
};

TEST_P(FastOpsTest, GemmAllEpiloguesAndTransposes) {
  const int64_t m = 37, n = 29, k = 13;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      for (Epilogue e : {Epilogue::kNone, Epilogue::kBias, Epilogue::kBiasGelu, Epilogue::kDGelu}) {
        Tensor a = RandomTensor(ta ? Shape{k, m} : Shape{m, k}, 1);
        Tensor b = RandomTensor(tb ? Shape{n, k} : Shape{k, n}, 2);
        Tensor bias = RandomTensor({n}, 3);
        Tensor aux_in = RandomTensor({m, n}, 4, 3.0f);
        GemmArgs g[2];
        Tensor db[2];
        for (int w = 0; w < 2; ++w) {
          g[w].out = RandomTensor({m, n}, 5);
          g[w].a = a;
          g[w].b = b;
          g[w].trans_a = ta;
          g[w].trans_b = tb;
          g[w].epilogue = e;
          g[w].accumulate = e == Epilogue::kNone;
          if (e == Epilogue::kBias || e == Epilogue::kBiasGelu) g[w].bias = bias;
          if (e == Epilogue::kBiasGelu) g[w].aux = Empty({m, n});
          if (e == Epilogue::kDGelu) {
            g[w].aux = aux_in;
            db[w] = RandomTensor({n}, 6);
            g[w].bias_grad = db[w];
          }
        }
        ASSERT_TRUE(fast_.Gemm(kCtx, g[0]).ok());
        ASSERT_TRUE(ref_.Gemm(kCtx, g[1]).ok());
        ExpectClose(g[0].out, g[1].out, 1e-5, "gemm out");
        if (e == Epilogue::kBiasGelu) ExpectBitwise(g[0].aux, g[1].aux, "gemm aux");
        if (e == Epilogue::kDGelu) ExpectClose(db[0], db[1], 1e-5, "gemm bias_grad");
      }
    }
  }
}

TEST_P(FastOpsTest, WeightGradientWithItsBiasGradientIsBitwiseTheReference) {
  // dW += dyᵀ·x with db += column sums of dy from the same call.
  const int64_t tokens = 45, out = 37, in = 29;
  Tensor dy = RandomTensor({tokens, out}, 1), x = RandomTensor({tokens, in}, 2);
  Tensor dw0 = RandomTensor({out, in}, 3), db0 = RandomTensor({out}, 4);
  Tensor dw[2] = {Copy(dw0), Copy(dw0)}, db[2] = {Copy(db0), Copy(db0)};
  for (int w = 0; w < 2; ++w) {
    GemmArgs g{.out = dw[w], .a = dy, .b = x, .trans_a = true, .accumulate = true};
    g.a_col_sums = db[w];
    ASSERT_TRUE((w == 0 ? static_cast<KernelOps&>(fast_) : ref_).Gemm(kCtx, g).ok());
  }
  ExpectClose(dw[0], dw[1], 1e-5, "weight gradient");
  ExpectBitwise(db[0], db[1], "bias gradient");
  // And the same bits as a separate BiasGrad, which the layers used before.
  Tensor separate = Copy(db0);
  ASSERT_TRUE(ref_.BiasGrad(kCtx, separate, dy).ok());
  ExpectBitwise(db[0], separate, "bias gradient vs BiasGrad");
}

TEST_P(FastOpsTest, BiasGradIsBitwiseTheReference) {
  Tensor dy = RandomTensor({53, 70}, 1);
  Tensor a = RandomTensor({70}, 2), b = Copy(a);
  ASSERT_TRUE(fast_.BiasGrad(kCtx, a, dy).ok());
  ASSERT_TRUE(ref_.BiasGrad(kCtx, b, dy).ok());
  ExpectBitwise(a, b, "bias grad");
}

TEST_P(FastOpsTest, LayerNorm) {
  for (int64_t c : {5, 64, 131}) {
    const int64_t rows = 19;
    Tensor x = RandomTensor({rows, c}, 1, 2.0f), r = RandomTensor({rows, c}, 2);
    Tensor w = RandomTensor({c}, 3), b = RandomTensor({c}, 4);
    Tensor out[2] = {Empty({rows, c}), Empty({rows, c})};
    Tensor mean[2] = {Empty({rows}), Empty({rows})}, rstd[2] = {Empty({rows}), Empty({rows})};
    ASSERT_TRUE(fast_.LayerNormForward(kCtx, out[0], mean[0], rstd[0], x, w, b, 1e-5f).ok());
    ASSERT_TRUE(ref_.LayerNormForward(kCtx, out[1], mean[1], rstd[1], x, w, b, 1e-5f).ok());
    ExpectClose(out[0], out[1], 2e-5, "ln out");
    ExpectClose(mean[0], mean[1], 2e-5, "ln mean");
    ExpectClose(rstd[0], rstd[1], 2e-5, "ln rstd");
    Tensor res[2] = {Empty({rows, c}), Empty({rows, c})};
    ASSERT_TRUE(fast_.ResidualLayerNormForward(kCtx, res[0], out[0], mean[0], rstd[0], x, r, w,
                                               b, 1e-5f).ok());
    ASSERT_TRUE(ref_.ResidualLayerNormForward(kCtx, res[1], out[1], mean[1], rstd[1], x, r, w, b,
                                              1e-5f).ok());
    ExpectBitwise(res[0], res[1], "residual");
    ExpectClose(out[0], out[1], 2e-5, "residual ln out");
    Tensor dy = RandomTensor({rows, c}, 7);
    // Residual: none, dx itself (accumulate), or another tensor.
    const Tensor other = RandomTensor({rows, c}, 11);
    for (int residual : {0, 1, 2}) {
      Tensor dx[2] = {RandomTensor({rows, c}, 8), RandomTensor({rows, c}, 8)};
      Tensor dw[2] = {RandomTensor({c}, 9), RandomTensor({c}, 9)};
      Tensor db[2] = {RandomTensor({c}, 10), RandomTensor({c}, 10)};
      const Tensor res0 = residual == 0 ? Tensor() : residual == 1 ? dx[0] : other;
      const Tensor res1 = residual == 0 ? Tensor() : residual == 1 ? dx[1] : other;
      ASSERT_TRUE(fast_.LayerNormBackward(kCtx, dx[0], dw[0], db[0], dy, x, w, mean[1], rstd[1],
                                          res0).ok());
      ASSERT_TRUE(ref_.LayerNormBackward(kCtx, dx[1], dw[1], db[1], dy, x, w, mean[1], rstd[1],
                                         res1).ok());
      ExpectClose(dx[0], dx[1], 2e-5, "ln dx");
      ExpectClose(dw[0], dw[1], 2e-5, "ln dw");
      ExpectClose(db[0], db[1], 2e-5, "ln db");
    }
  }
}

TEST_P(FastOpsTest, Attention) {
  // t = 150: three row blocks of the causal blocking, the last one partial.
  for (auto [hs, t] : {std::pair<int64_t, int64_t>{5, 23}, {32, 23}, {32, 150}, {8, 128}}) {
    const int64_t b = 2, nh = 3, c = nh * hs;
    Tensor qkv = RandomTensor({b, t, 3 * c}, 1);
    Tensor out[2] = {Empty({b, t, c}), Empty({b, t, c})};
    Tensor lse[2] = {Empty({b, nh, t}), Empty({b, nh, t})};
    ASSERT_TRUE(fast_.AttentionForward(kCtx, out[0], lse[0], qkv, nh).ok());
    ASSERT_TRUE(ref_.AttentionForward(kCtx, out[1], lse[1], qkv, nh).ok());
    ExpectClose(out[0], out[1], 2e-5, "attn out");
    ExpectClose(lse[0], lse[1], 2e-5, "attn lse");
    Tensor dout = RandomTensor({b, t, c}, 2);
    Tensor dqkv[2] = {Empty({b, t, 3 * c}), Empty({b, t, 3 * c})};
    ASSERT_TRUE(fast_.AttentionBackward(kCtx, dqkv[0], dout, qkv, out[1], lse[1], nh).ok());
    ASSERT_TRUE(ref_.AttentionBackward(kCtx, dqkv[1], dout, qkv, out[1], lse[1], nh).ok());
    ExpectClose(dqkv[0], dqkv[1], 2e-5, "attn dqkv");
  }
}

TEST_P(FastOpsTest, CrossEntropy) {
  const int64_t rows = 11, vocab = 65, vp = 128;
  Tensor targets = *Tensor::Empty({rows}, DType::kI32);
  for (int64_t r = 0; r < rows; ++r) targets.data<int32_t>()[r] = r == 3 ? -1 : (r * 7) % vocab;
  Tensor logits = RandomTensor({rows, vp}, 1, 4.0f);
  for (bool grad : {false, true}) {
    Tensor z[2] = {Copy(logits), Copy(logits)};
    Tensor loss[2] = {Empty({rows}), Empty({rows})};
    ASSERT_TRUE(fast_.CrossEntropyForwardBackward(kCtx, loss[0], z[0], targets, vocab, 0.25f,
                                                  grad).ok());
    ASSERT_TRUE(ref_.CrossEntropyForwardBackward(kCtx, loss[1], z[1], targets, vocab, 0.25f,
                                                 grad).ok());
    ExpectClose(loss[0], loss[1], 2e-5, "ce loss");
    ExpectClose(z[0], z[1], 2e-5, "ce grad");
  }
  targets.data<int32_t>()[5] = vocab;
  Tensor z = Copy(logits), loss = Empty({rows});
  EXPECT_FALSE(fast_.CrossEntropyForwardBackward(kCtx, loss, z, targets, vocab, 1.f, true).ok());
}

TEST_P(FastOpsTest, GeluAndAdd) {
  Tensor x = RandomTensor({10001}, 1, 4.0f), dy = RandomTensor({10001}, 2);
  Tensor o[2] = {Empty({10001}), Empty({10001})};
  ASSERT_TRUE(fast_.GeluForward(kCtx, o[0], x).ok());
  ASSERT_TRUE(ref_.GeluForward(kCtx, o[1], x).ok());
  ExpectClose(o[0], o[1], 1e-5, "gelu");
  ASSERT_TRUE(fast_.GeluBackward(kCtx, o[0], dy, x).ok());
  ASSERT_TRUE(ref_.GeluBackward(kCtx, o[1], dy, x).ok());
  ExpectClose(o[0], o[1], 1e-5, "gelu grad");
  ASSERT_TRUE(fast_.Add(kCtx, o[0], x, dy).ok());
  ASSERT_TRUE(ref_.Add(kCtx, o[1], x, dy).ok());
  ExpectBitwise(o[0], o[1], "add");
}

TEST_P(FastOpsTest, AdamWIsBitwiseTheReferenceAndSumSquaresClose) {
  std::vector<Tensor> t[2];
  std::vector<OptimSegment> segs[2];
  for (int w = 0; w < 2; ++w) {
    for (int64_t n : {7, 40000}) {
      OptimSegment s;
      s.master = RandomTensor({n}, 1);
      s.param = Empty({n});
      s.grad = RandomTensor({n}, 2);
      s.exp_avg = RandomTensor({n}, 3, 0.1f);
      s.exp_avg_sq = RandomTensor({n}, 4, 0.0f);
      s.weight_decay = n > 10;
      segs[w].push_back(s);
    }
  }
  Tensor nsq[2] = {Empty({1}), Empty({1})};
  std::vector<Tensor> grads[2];
  for (int w = 0; w < 2; ++w) for (auto& s : segs[w]) grads[w].push_back(s.grad);
  ASSERT_TRUE(fast_.SumSquares(kCtx, nsq[0], grads[0]).ok());
  ASSERT_TRUE(ref_.SumSquares(kCtx, nsq[1], grads[1]).ok());
  ExpectClose(nsq[0], nsq[1], 1e-6, "sum squares");
  AdamWHyper h;
  h.step = 3;
  h.max_grad_norm = 1.0f;
  h.grad_norm_sq = nsq[1];
  ASSERT_TRUE(fast_.AdamW(kCtx, absl::MakeSpan(segs[0]), h).ok());
  ASSERT_TRUE(ref_.AdamW(kCtx, absl::MakeSpan(segs[1]), h).ok());
  for (int i = 0; i < 2; ++i) {
    ExpectBitwise(segs[0][i].master, segs[1][i].master, "adamw master");
    ExpectBitwise(segs[0][i].param, segs[1][i].master, "adamw param");
    ExpectBitwise(segs[0][i].exp_avg_sq, segs[1][i].exp_avg_sq, "adamw v");
  }
  // Step 4 with lr and bias corrections from memory (what a CUDA graph
  // replay reads) and the by-value fields set to nonsense: the same bits.
  AdamWHyper by_value = h, in_memory = h;
  by_value.step = 4;
  by_value.lr = 2e-3f;
  const std::array<float, 3> k = AdamWStepScalars(2e-3f, h.beta1, h.beta2, 4);
  in_memory.step_scalars = *Tensor::FromVector<float>(k, {3});
  in_memory.lr = -1.0f;
  in_memory.step = 0;
  ASSERT_TRUE(fast_.AdamW(kCtx, absl::MakeSpan(segs[0]), in_memory).ok());
  ASSERT_TRUE(ref_.AdamW(kCtx, absl::MakeSpan(segs[1]), by_value).ok());
  for (int i = 0; i < 2; ++i) ExpectBitwise(segs[0][i].master, segs[1][i].master, "adamw in memory");
}

INSTANTIATE_TEST_SUITE_P(Threads, FastOpsTest, ::testing::Values(1, 3));

// Results must not depend on the pool's thread count.
TEST(FastOpsDeterminism, ThreadCountDoesNotChangeResults) {
  FastCpuKernelOps ops;
  const int64_t b = 3, t = 70, nh = 2, c = 16;  // two attention row blocks
  Tensor qkv = RandomTensor({b, t, 3 * c}, 1), dout = RandomTensor({b, t, c}, 2);
  Tensor x = RandomTensor({b * t, c}, 3), w = RandomTensor({c}, 4), bb = RandomTensor({c}, 5);
  std::vector<float> results[2];
  for (int run = 0; run < 2; ++run) {
    SetKernelThreads(run == 0 ? 1 : 3);
    Tensor out = Empty({b, t, c}), lse = Empty({b, nh, t}), dqkv = Empty({b, t, 3 * c});
    ASSERT_TRUE(ops.AttentionForward(kCtx, out, lse, qkv, nh).ok());
    ASSERT_TRUE(ops.AttentionBackward(kCtx, dqkv, dout, qkv, out, lse, nh).ok());
    Tensor y = Empty({b * t, c}), mean = Empty({b * t}), rstd = Empty({b * t});
    ASSERT_TRUE(ops.LayerNormForward(kCtx, y, mean, rstd, x, w, bb, 1e-5f).ok());
    Tensor dx = Empty({b * t, c}), dw = RandomTensor({c}, 6), db = RandomTensor({c}, 7);
    ASSERT_TRUE(ops.LayerNormBackward(kCtx, dx, dw, db, y, x, w, mean, rstd, Tensor()).ok());
    GemmArgs g;
    g.out = Empty({c, c});
    g.a = x;
    g.b = y;
    g.trans_a = true;
    ASSERT_TRUE(ops.Gemm(kCtx, g).ok());
    for (const Tensor* r : {&out, &lse, &dqkv, &y, &dx, &dw, &db, &g.out}) {
      std::vector<float> v = Values(*r);
      results[run].insert(results[run].end(), v.begin(), v.end());
    }
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) ASSERT_EQ(results[0][i], results[1][i]) << i;
}

}  // namespace
}  // namespace weft::cpu
