// CPU-vs-CUDA parity for the token + position embedding (forward and the
// sorted, deterministic backward) and the fused softmax + cross-entropy,
// including GPT-2's padded vocabulary (50257 of 50304 columns) and ignored
// targets. Tolerances: f32 1e-5 (1e-4 for gradient sums), bf16 1e-2/2e-2.
#include <cmath>
#include <cstdlib>

#include "core/kernels/cuda/parity_util.h"
#include "gtest/gtest.h"

namespace weft::cuda::testing {
namespace {

std::vector<int32_t> Tokens(int64_t n, int32_t vocab, uint64_t seed) {
  std::vector<float> r = Random(n, seed);
  std::vector<int32_t> t(n);
  // Skewed towards small ids so some tokens repeat many times.
  for (int64_t i = 0; i < n; ++i) {
    t[i] = static_cast<int32_t>(std::floor(r[i] * r[i] * vocab)) % vocab;
  }
  return t;
}

TEST(EmbeddingParityTest, ForwardWithAndWithoutPositions) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (int64_t c : {int64_t{768}, int64_t{13}}) {
      const int64_t b = 3, t = 37, v = 101, max_t = 64;
      const auto wte = RoundTo(dt, Random(v * c, 1)), wpe = RoundTo(dt, Random(max_t * c, 2));
      const auto tok = Tokens(b * t, v, 3);
      for (bool positional : {true, false}) {
        Tensor cout = Host(std::vector<float>(b * t * c), {b, t, c});
        ASSERT_TRUE(CpuOps()
                        .EmbeddingForward(kCpuCtx, cout, HostI32(tok, {b, t}), Host(wte, {v, c}),
                                          positional ? Host(wpe, {max_t, c}) : Tensor())
                        .ok());
        Tensor gout = GpuZeros({b, t, c}, dt);
        const absl::Status st = GpuOps().EmbeddingForward(
            GpuCtx(), gout, GpuI32(tok, {b, t}), Gpu(wte, {v, c}, dt),
            positional ? Gpu(wpe, {max_t, c}, dt) : Tensor());
        ASSERT_TRUE(st.ok()) << st;
        EXPECT_TRUE(Close(Floats(gout), Floats(cout), TolFor(dt, false))) << c << positional;
      }
    }
  }
}

TEST(EmbeddingParityTest, BackwardAccumulatesDeterministically) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (DType grad_dt : {DType::kF32, DType::kBF16}) {
      const int64_t b = 4, t = 257, c = 768, v = 50, max_t = 300;
      SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " grads " << DTypeName(grad_dt));
      const auto dout = RoundTo(dt, Random(b * t * c, 4));
      const auto dwte0 = RoundTo(grad_dt, Random(v * c, 5));
      const auto dwpe0 = RoundTo(grad_dt, Random(max_t * c, 6));
      const auto tok = Tokens(b * t, v, 7);
      Tensor cwte = Host(dwte0, {v, c}), cwpe = Host(dwpe0, {max_t, c});
      ASSERT_TRUE(CpuOps()
                      .EmbeddingBackward(kCpuCtx, cwte, cwpe, Host(dout, {b, t, c}),
                                         HostI32(tok, {b, t}))
                      .ok());
      Tensor gdout = Gpu(dout, {b, t, c}, dt);
      Tensor gtok = GpuI32(tok, {b, t});
      std::vector<uint8_t> first;
      for (int run = 0; run < 2; ++run) {
        Tensor gwte = Gpu(dwte0, {v, c}, grad_dt), gwpe = Gpu(dwpe0, {max_t, c}, grad_dt);
        const absl::Status st = GpuOps().EmbeddingBackward(GpuCtx(), gwte, gwpe, gdout, gtok);
        ASSERT_TRUE(st.ok()) << st;
        const Tolerance tol = grad_dt == DType::kBF16 ? kBf16ReduceTol : kF32ReduceTol;
        EXPECT_TRUE(Close(Floats(gwte), Floats(cwte), tol)) << "dwte";
        EXPECT_TRUE(Close(Floats(gwpe), Floats(cwpe), tol)) << "dwpe";
        if (run == 0) {
          first = Bytes(gwte);
        } else {
          EXPECT_EQ(Bytes(gwte), first) << "dwte is not bitwise reproducible";
        }
      }
    }
  }
}

TEST(EmbeddingParityTest, OutOfRangeTokenGivesNaNRowsNotAFault) {
  const int64_t c = 16, v = 10;
  Tensor out = GpuZeros({1, 2, c}, DType::kF32);
  ASSERT_TRUE(GpuOps()
                  .EmbeddingForward(GpuCtx(), out, GpuI32({3, 99}, {1, 2}),
                                    Gpu(Random(v * c, 1), {v, c}, DType::kF32), Tensor())
                  .ok());
  const auto got = Floats(out);
  EXPECT_FALSE(std::isnan(got[0]));
  EXPECT_TRUE(std::isnan(got[c]));
}

void CheckCrossEntropy(DType dt, int64_t rows, int64_t vocab, int64_t padded, bool grad) {
  SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " rows=" << rows << " V=" << vocab
                                    << "/" << padded << " grad=" << grad);
  const auto logits = RoundTo(dt, Random(rows * padded, 11, 4.0f));
  std::vector<int32_t> targets = Tokens(rows, static_cast<int32_t>(vocab), 12);
  targets[rows / 2] = -1;  // ignored position
  targets[0] = static_cast<int32_t>(vocab - 1);
  const float scale = 1.0f / rows;
  Tensor closs = Host(std::vector<float>(rows), {rows});
  Tensor clogits = Host(logits, {rows, padded});
  ASSERT_TRUE(CpuOps()
                  .CrossEntropyForwardBackward(kCpuCtx, closs, clogits, HostI32(targets, {rows}),
                                               vocab, scale, grad)
                  .ok());
  Tensor gloss = GpuZeros({rows}, DType::kF32);
  Tensor glogits = Gpu(logits, {rows, padded}, dt);
  const absl::Status st = GpuOps().CrossEntropyForwardBackward(
      GpuCtx(), gloss, glogits, GpuI32(targets, {rows}), vocab, scale, grad);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(Close(Floats(gloss), Floats(closs), dt == DType::kBF16 ? kBf16Tol : kF32ReduceTol));
  EXPECT_EQ(Floats(gloss)[rows / 2], 0.0f);
  const auto g = Floats(glogits), want = Floats(clogits);
  EXPECT_TRUE(Close(g, want, TolFor(dt, false)));
  if (grad) {
    // The -1 at each target dominates the scale above; check the softmax
    // part on its own so small probabilities are held to the tolerance too.
    std::vector<float> g_rest, want_rest;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < vocab; ++j) {
        if (j == targets[r]) continue;
        g_rest.push_back(g[r * padded + j]);
        want_rest.push_back(want[r * padded + j]);
      }
    }
    EXPECT_TRUE(Close(g_rest, want_rest, TolFor(dt, false))) << "non-target gradients";
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = vocab; j < padded; ++j) ASSERT_EQ(g[r * padded + j], 0.0f);
    }
    for (int64_t j = 0; j < padded; ++j) ASSERT_EQ(g[(rows / 2) * padded + j], 0.0f);
  }
}

TEST(CrossEntropyParityTest, SmallVocabularies) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (bool grad : {false, true}) {
      CheckCrossEntropy(dt, 6, 65, 128, grad);
      CheckCrossEntropy(dt, 5, 13, 13, grad);  // scalar path
      CheckCrossEntropy(dt, 3, 1, 8, grad);
    }
  }
}

TEST(CrossEntropyParityTest, Gpt2PaddedVocabulary) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    CheckCrossEntropy(dt, 8, 50257, 50304, true);
  }
}

// The kernel that keeps each row in shared memory (the default where two
// rows fit an SM) and the two-pass kernel give the same bits: the same
// operations in the same order, read from shared memory instead of global.
TEST(CrossEntropyParityTest, ResidentKernelEqualsTwoPassBitwise) {
  for (DType dt : {DType::kBF16, DType::kF32}) {
    const int64_t rows = 96, vocab = 50257, padded = 50304;
    const auto logits = RoundTo(dt, Random(rows * padded, 21, 6.0f));
    std::vector<int32_t> targets = Tokens(rows, static_cast<int32_t>(vocab), 22);
    targets[3] = -1;
    targets[4] = static_cast<int32_t>(vocab - 1);
    std::vector<uint8_t> loss[2], grad[2];
    const char* kernels[2] = {"two-pass", "resident"};
    for (int k = 0; k < 2; ++k) {
      setenv("WEFT_CE_KERNEL", kernels[k], 1);
      Tensor gloss = GpuZeros({rows}, DType::kF32);
      Tensor glogits = Gpu(logits, {rows, padded}, dt);
      const absl::Status st = GpuOps().CrossEntropyForwardBackward(
          GpuCtx(), gloss, glogits, GpuI32(targets, {rows}), vocab, 1.0f / rows, true);
      unsetenv("WEFT_CE_KERNEL");
      ASSERT_TRUE(st.ok()) << kernels[k] << ": " << st;
      loss[k] = Bytes(gloss);
      grad[k] = Bytes(glogits);
    }
    EXPECT_TRUE(loss[0] == loss[1]) << DTypeName(dt) << ": losses differ";
    EXPECT_TRUE(grad[0] == grad[1]) << DTypeName(dt) << ": gradients differ";
  }
}

TEST(CrossEntropyParityTest, TargetPastVocabGivesNaNLoss) {
  Tensor loss = GpuZeros({1}, DType::kF32);
  Tensor logits = Gpu(Random(16, 1), {1, 16}, DType::kF32);
  ASSERT_TRUE(GpuOps()
                  .CrossEntropyForwardBackward(GpuCtx(), loss, logits, GpuI32({12}, {1}), 10,
                                               1.0f, true)
                  .ok());
  EXPECT_TRUE(std::isnan(Floats(loss)[0]));
}

}  // namespace
}  // namespace weft::cuda::testing
