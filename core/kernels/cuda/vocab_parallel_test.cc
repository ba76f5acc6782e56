// CPU-vs-CUDA parity for the vocabulary-parallel kernels (tensor
// parallelism): the cross-entropy's Stats / Rescale / Finish over 1, 2 and 4
// column shards (the all-reduces done on the host), the embedding shard's
// forward and its deterministic backward. Padded columns, ignored targets,
// shards holding only padding, GPT-2's 50257 of 50304 columns and 32K rows
// (B*T = 32 x 1024) included; f32 and bf16. One shard on CUDA must equal
// the fused CUDA cross-entropy bit for bit (tp=1 == no tp).
#include <algorithm>
#include <cmath>

#include "core/kernels/cuda/parity_util.h"
#include "gtest/gtest.h"

namespace weft::cuda::testing {
namespace {

struct CeResult {
  std::vector<float> losses;
  std::vector<float> grad;  // (rows, padded), the shards' columns side by side
};

// The vocabulary-parallel loss over `shards` blocks of columns, on the GPU
// (dtype dt) or the CPU (f32), as tp ranks would run it.
CeResult VocabParallel(bool gpu, DType dt, const std::vector<float>& logits,
                       const std::vector<int32_t>& y, int64_t vocab, int64_t padded, int shards,
                       float scale, bool grad) {
  const int64_t n = static_cast<int64_t>(y.size()), w = padded / shards;
  KernelOps& ops = gpu ? GpuOps() : CpuOps();
  const KernelContext ctx = gpu ? GpuCtx() : kCpuCtx;
  auto f32 = [&](const std::vector<float>& v) { return gpu ? Gpu(v, {n}, DType::kF32) : Host(v, {n}); };
  const Tensor targets = gpu ? GpuI32(y, {n}) : HostI32(y, {n});
  std::vector<Tensor> z, mx, se, tl;
  std::vector<float> global_max(n, -INFINITY);
  for (int s = 0; s < shards; ++s) {
    std::vector<float> cols;
    for (int64_t r = 0; r < n; ++r) {
      cols.insert(cols.end(), logits.begin() + r * padded + s * w,
                  logits.begin() + r * padded + (s + 1) * w);
    }
    z.push_back(gpu ? Gpu(cols, {n, w}, dt) : Host(cols, {n, w}));
    for (auto* v : {&mx, &se, &tl}) v->push_back(f32(std::vector<float>(n, 7.f)));
    const absl::Status st =
        ops.VocabCrossEntropyStats(ctx, mx[s], se[s], tl[s], z[s], targets, s * w, vocab);
    EXPECT_TRUE(st.ok()) << st;
    const std::vector<float> m = Floats(mx[s]);
    for (int64_t r = 0; r < n; ++r) global_max[r] = std::max(global_max[r], m[r]);
  }
  const Tensor gmax = f32(global_max);
  std::vector<float> sum(n, 0.f), target(n, 0.f);
  for (int s = 0; s < shards; ++s) {
    const absl::Status st = ops.VocabCrossEntropyRescale(ctx, se[s], mx[s], gmax);
    EXPECT_TRUE(st.ok()) << st;
    const std::vector<float> a = Floats(se[s]), b = Floats(tl[s]);
    for (int64_t r = 0; r < n; ++r) {
      sum[r] += a[r];
      target[r] += b[r];
    }
  }
  const Tensor tsum = f32(sum), ttarget = f32(target);
  CeResult out;
  out.grad.assign(n * padded, 0.f);
  for (int s = 0; s < shards; ++s) {
    Tensor losses = f32(std::vector<float>(n, 7.f));
    const absl::Status st = ops.VocabCrossEntropyFinish(ctx, losses, z[s], targets, s * w, vocab,
                                                        gmax, tsum, ttarget, scale, grad);
    EXPECT_TRUE(st.ok()) << st;
    const std::vector<float> l = Floats(losses);
    if (s == 0) out.losses = l;
    // Equal as values, NaN (a target past the vocabulary) matching NaN.
    const auto same = [](float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); };
    EXPECT_TRUE(std::equal(l.begin(), l.end(), out.losses.begin(), out.losses.end(), same))
        << "every shard gets the whole loss";
    const std::vector<float> g = Floats(z[s]);
    for (int64_t r = 0; r < n; ++r) {
      std::copy(g.begin() + r * w, g.begin() + (r + 1) * w, out.grad.begin() + r * padded + s * w);
    }
  }
  return out;
}

std::vector<int32_t> Targets(int64_t rows, int64_t vocab) {
  const std::vector<float> r = Random(rows, 12);
  std::vector<int32_t> y(rows);
  for (int64_t i = 0; i < rows; ++i) {
    y[i] = static_cast<int32_t>(std::floor((r[i] * 0.5f + 0.5f) * vocab)) % vocab;
  }
  y[rows / 2] = -1;                             // ignored position
  y[0] = static_cast<int32_t>(vocab - 1);       // the last real class
  if (rows > 2) y[1] = -100;                    // ignored, far below 0
  return y;
}

void CheckVocabCrossEntropy(DType dt, int64_t rows, int64_t vocab, int64_t padded, int shards,
                            bool grad) {
  SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " rows=" << rows << " V=" << vocab << "/"
                                    << padded << " shards=" << shards << " grad=" << grad);
  const auto logits = RoundTo(dt, Random(rows * padded, 11, 4.0f));
  const auto y = Targets(rows, vocab);
  const float scale = 1.0f / rows;
  const CeResult cpu = VocabParallel(false, dt, logits, y, vocab, padded, shards, scale, grad);
  const CeResult gpu = VocabParallel(true, dt, logits, y, vocab, padded, shards, scale, grad);
  EXPECT_TRUE(Close(gpu.losses, cpu.losses, dt == DType::kBF16 ? kBf16Tol : kF32ReduceTol));
  EXPECT_EQ(gpu.losses[rows / 2], 0.0f);
  if (!grad) return;
  EXPECT_TRUE(Close(gpu.grad, cpu.grad, TolFor(dt, false)));
  for (int64_t r = 0; r < rows; ++r) {
    const bool ignored = y[r] < 0;
    for (int64_t j = 0; j < padded; ++j) {
      if (ignored || j >= vocab) {
        ASSERT_EQ(gpu.grad[r * padded + j], 0.0f) << r << ", " << j;
      }
    }
  }
}

TEST(VocabCrossEntropyParityTest, ShardsPaddingAndIgnoredTargets) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (bool grad : {false, true}) {
      for (int shards : {1, 2, 4}) {
        CheckVocabCrossEntropy(dt, 6, 61, 64, shards, grad);
        CheckVocabCrossEntropy(dt, 5, 5, 16, shards, grad);  // 2 of 4 shards: padding only
      }
      CheckVocabCrossEntropy(dt, 5, 13, 13, 1, grad);  // scalar path (13 % 8 != 0)
      CheckVocabCrossEntropy(dt, 4, 50, 52, 2, grad);  // 26 columns: scalar path per shard
    }
  }
}

TEST(VocabCrossEntropyParityTest, Gpt2PaddedVocabulary) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (int shards : {1, 2, 4, 8}) CheckVocabCrossEntropy(dt, 4, 50257, 50304, shards, true);
  }
}

TEST(VocabCrossEntropyParityTest, ThirtyTwoThousandRows) {
  // One block per row: 32 x 1024 rows is the grid of a GPT-2 micro-batch.
  CheckVocabCrossEntropy(DType::kBF16, 32 * 1024, 61, 64, 2, true);
}

// tp=1 must train like no tp: one shard holding every column reproduces the
// fused kernel exactly (same row passes, a rescale factor of exactly 1).
TEST(VocabCrossEntropyParityTest, OneShardIsTheFusedKernelBitwise) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (auto [rows, vocab, padded] : {std::tuple<int64_t, int64_t, int64_t>{8, 50257, 50304},
                                       {6, 61, 64}, {5, 13, 13}}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " V=" << vocab << "/" << padded);
      const auto logits = RoundTo(dt, Random(rows * padded, 21, 4.0f));
      const auto y = Targets(rows, vocab);
      const float scale = 1.0f / rows;
      const CeResult split = VocabParallel(true, dt, logits, y, vocab, padded, 1, scale, true);
      Tensor loss = GpuZeros({rows}, DType::kF32);
      Tensor z = Gpu(logits, {rows, padded}, dt);
      ASSERT_TRUE(GpuOps()
                      .CrossEntropyForwardBackward(GpuCtx(), loss, z, GpuI32(y, {rows}), vocab,
                                                   scale, true)
                      .ok());
      EXPECT_EQ(split.losses, Floats(loss));
      EXPECT_EQ(split.grad, Floats(z));
    }
  }
}

TEST(VocabCrossEntropyParityTest, TargetPastVocabGivesNaNLossNotAFault) {
  const CeResult r =
      VocabParallel(true, DType::kF32, Random(2 * 16, 1), {3, 12}, 10, 16, 2, 1.0f, true);
  EXPECT_FALSE(std::isnan(r.losses[0]));
  EXPECT_TRUE(std::isnan(r.losses[1]));
  for (int64_t j = 0; j < 16; ++j) EXPECT_EQ(r.grad[16 + j], 0.0f);
}

TEST(VocabEmbeddingParityTest, ShardsForwardAndDeterministicBackward) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (DType grad_dt : {DType::kF32, DType::kBF16}) {
      for (int64_t c : {int64_t{768}, int64_t{13}}) {
        SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " grads " << DTypeName(grad_dt)
                                          << " C=" << c);
        const int64_t b = 4, t = 67, rows = 104, shards = 4, w = rows / shards, max_t = 80;
        const auto wte = RoundTo(dt, Random(rows * c, 1)), wpe = RoundTo(dt, Random(max_t * c, 2));
        const auto dout = RoundTo(dt, Random(b * t * c, 4));
        const auto r = Random(b * t, 3);
        std::vector<int32_t> tok(b * t);
        // Skewed towards small ids: some repeat many times, in every shard.
        for (int64_t i = 0; i < b * t; ++i) {
          tok[i] = static_cast<int32_t>(std::floor(r[i] * r[i] * rows)) % rows;
        }
        tok[5] = static_cast<int32_t>(rows + 9);  // held by no shard: 0 (+ positions)
        for (int64_t s = 0; s < shards; ++s) {
          std::vector<float> shard(wte.begin() + s * w * c, wte.begin() + (s + 1) * w * c);
          const Tensor pos_c = s == 0 ? Host(wpe, {max_t, c}) : Tensor();
          const Tensor pos_g = s == 0 ? Gpu(wpe, {max_t, c}, dt) : Tensor();
          Tensor cout = Host(std::vector<float>(b * t * c), {b, t, c});
          ASSERT_TRUE(CpuOps()
                          .VocabEmbeddingForward(kCpuCtx, cout, HostI32(tok, {b, t}),
                                                 Host(shard, {w, c}), s * w, pos_c)
                          .ok());
          Tensor gout = GpuZeros({b, t, c}, dt);
          absl::Status st = GpuOps().VocabEmbeddingForward(
              GpuCtx(), gout, GpuI32(tok, {b, t}), Gpu(shard, {w, c}, dt), s * w, pos_g);
          ASSERT_TRUE(st.ok()) << st;
          EXPECT_TRUE(Close(Floats(gout), Floats(cout), TolFor(dt, false))) << "shard " << s;

          const auto dwte0 = RoundTo(grad_dt, Random(w * c, 5 + s));
          const auto dwpe0 = RoundTo(grad_dt, Random(max_t * c, 6));
          Tensor cwte = Host(dwte0, {w, c}), cwpe = Host(dwpe0, {max_t, c});
          ASSERT_TRUE(CpuOps()
                          .VocabEmbeddingBackward(kCpuCtx, cwte, cwpe, Host(dout, {b, t, c}),
                                                  HostI32(tok, {b, t}), s * w)
                          .ok());
          std::vector<uint8_t> first;
          for (int run = 0; run < 2; ++run) {
            Tensor gwte = Gpu(dwte0, {w, c}, grad_dt), gwpe = Gpu(dwpe0, {max_t, c}, grad_dt);
            st = GpuOps().VocabEmbeddingBackward(GpuCtx(), gwte, gwpe, Gpu(dout, {b, t, c}, dt),
                                                 GpuI32(tok, {b, t}), s * w);
            ASSERT_TRUE(st.ok()) << st;
            const Tolerance tol = grad_dt == DType::kBF16 ? kBf16ReduceTol : kF32ReduceTol;
            EXPECT_TRUE(Close(Floats(gwte), Floats(cwte), tol)) << "dwte shard " << s;
            EXPECT_TRUE(Close(Floats(gwpe), Floats(cwpe), tol)) << "dwpe shard " << s;
            if (run == 0) {
              first = Bytes(gwte);
            } else {
              EXPECT_EQ(Bytes(gwte), first) << "dwte is not bitwise reproducible";
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace weft::cuda::testing
