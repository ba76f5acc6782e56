// The vocabulary-parallel kernels, split over k shards with the all-reduces
// done by hand, equal the single-process fused cross-entropy and embedding:
// padded columns, ignored targets and shards holding only padding included.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/kernels/cpu/cpu_ops.h"
#include "core/testing/grad_check.h"
#include "gtest/gtest.h"

namespace weft::cpu {
namespace {

using ::weft::testing::RandomTensor;
using ::weft::testing::Values;

const KernelContext kCtx{Device::Cpu()};

// Columns [begin, begin + w) of every row of x (rows, cols), a copy (Finish
// overwrites it).
Tensor Columns(const Tensor& x, int64_t begin, int64_t w) {
  return *x.Slice(1, begin, begin + w).Clone();
}

struct Result {
  std::vector<float> losses, grad;  // grad (rows, padded), shards side by side
};

// The three steps on `shards` column blocks of logits (rows, padded).
Result VocabParallel(CpuKernelOps& ops, const Tensor& logits, const std::vector<int32_t>& y,
                     int64_t vocab, int shards, float scale) {
  const int64_t n = logits.dim(0), padded = logits.dim(1), w = padded / shards;
  Tensor targets = *Tensor::FromVector<int32_t>(y, {n});
  std::vector<Tensor> z, mx, se, tl;
  for (int s = 0; s < shards; ++s) {
    z.push_back(Columns(logits, s * w, w));
    mx.push_back(*Tensor::Empty({n}, DType::kF32));
    se.push_back(*Tensor::Empty({n}, DType::kF32));
    tl.push_back(*Tensor::Empty({n}, DType::kF32));
    EXPECT_TRUE(
        ops.VocabCrossEntropyStats(kCtx, mx[s], se[s], tl[s], z[s], targets, s * w, vocab).ok());
  }
  Tensor global_max = *Tensor::FromFloats(std::vector<float>(n, -INFINITY), {n});
  for (int s = 0; s < shards; ++s) {
    for (int64_t i = 0; i < n; ++i) {
      global_max.data<float>()[i] = std::max(global_max.data<float>()[i], mx[s].data<float>()[i]);
    }
  }
  Tensor sum = *Tensor::Zeros({n}, DType::kF32), target = *Tensor::Zeros({n}, DType::kF32);
  for (int s = 0; s < shards; ++s) {
    EXPECT_TRUE(ops.VocabCrossEntropyRescale(kCtx, se[s], mx[s], global_max).ok());
    for (int64_t i = 0; i < n; ++i) {
      sum.data<float>()[i] += se[s].data<float>()[i];
      target.data<float>()[i] += tl[s].data<float>()[i];
    }
  }
  Result r;
  r.grad.assign(n * padded, 0.f);
  for (int s = 0; s < shards; ++s) {
    Tensor losses = *Tensor::Empty({n}, DType::kF32);
    EXPECT_TRUE(ops.VocabCrossEntropyFinish(kCtx, losses, z[s], targets, s * w, vocab, global_max,
                                            sum, target, scale, true)
                    .ok());
    if (s == 0) r.losses = Values(losses);
    EXPECT_EQ(Values(losses), r.losses) << "every shard gets the whole loss";
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < w; ++j) r.grad[i * padded + s * w + j] = z[s].data<float>()[i * w + j];
    }
  }
  return r;
}

Result Fused(CpuKernelOps& ops, const Tensor& logits, const std::vector<int32_t>& y,
             int64_t vocab, float scale) {
  Tensor z = *logits.Clone();
  Tensor targets = *Tensor::FromVector<int32_t>(y, {logits.dim(0)});
  Tensor losses = *Tensor::Empty({logits.dim(0)}, DType::kF32);
  EXPECT_TRUE(ops.CrossEntropyForwardBackward(kCtx, losses, z, targets, vocab, scale, true).ok());
  return {Values(losses), Values(z)};
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.f, std::fabs(want[i]))) << what << " at " << i;
  }
}

TEST(VocabParallelCrossEntropyTest, ShardsEqualTheFusedKernel) {
  CpuKernelOps ops;
  struct Case {
    int64_t rows, vocab, padded;
  };
  // 5 of 16 columns real: over 4 shards two hold only padding.
  for (const Case c : {Case{9, 61, 64}, Case{7, 5, 16}, Case{4, 64, 64}}) {
    Tensor logits = RandomTensor({c.rows, c.padded}, 7, 4.f);
    std::vector<int32_t> y(c.rows);
    for (int64_t i = 0; i < c.rows; ++i) y[i] = static_cast<int32_t>((i * 37) % c.vocab);
    y[1] = -1;                                        // ignored
    y[c.rows - 1] = static_cast<int32_t>(c.vocab - 1);  // the last real class
    const Result want = Fused(ops, logits, y, c.vocab, 0.25f);
    for (int shards : {1, 2, 4}) {
      const std::string what = "vocab " + std::to_string(c.vocab) + " shards " +
                               std::to_string(shards);
      const Result got = VocabParallel(ops, logits, y, c.vocab, shards, 0.25f);
      ExpectNear(got.losses, want.losses, 1e-6f, what + " losses");
      ExpectNear(got.grad, want.grad, 1e-6f, what + " grad");
      EXPECT_EQ(got.losses[1], 0.f) << what;
      for (int64_t j = 0; j < c.padded; ++j) EXPECT_EQ(got.grad[c.padded + j], 0.f) << what;
      for (int64_t i = 0; i < c.rows; ++i) {
        for (int64_t j = c.vocab; j < c.padded; ++j) {
          EXPECT_EQ(got.grad[i * c.padded + j], 0.f) << what << " padding (" << i << ", " << j << ")";
        }
      }
    }
  }
}

TEST(VocabParallelCrossEntropyTest, TargetBeyondTheVocabularyIsAnError) {
  CpuKernelOps ops;
  Tensor logits = RandomTensor({2, 8}, 1, 1.f);
  Tensor targets = *Tensor::FromVector<int32_t>(std::vector<int32_t>{0, 7}, {2});
  Tensor mx = *Tensor::Empty({2}, DType::kF32), se = mx.Clone().value(), tl = mx.Clone().value();
  absl::Status s = ops.VocabCrossEntropyStats(kCtx, mx, se, tl, logits, targets, 0, 6);
  EXPECT_NE(s.message().find("target id 7 in row 1"), std::string::npos) << s;
}

TEST(VocabParallelEmbeddingTest, ShardsSumToTheEmbeddingAndSplitItsGradient) {
  CpuKernelOps ops;
  const int64_t b = 2, t = 5, c = 3, rows = 12, shards = 3, w = rows / shards;
  Tensor wte = RandomTensor({rows, c}, 3), wpe = RandomTensor({8, c}, 4);
  std::vector<int32_t> ids = {0, 11, 4, 3, 8, 7, 5, 11, 0, 2};
  Tensor tokens = *Tensor::FromVector<int32_t>(ids, {b, t});
  Tensor want = *Tensor::Empty({b, t, c}, DType::kF32);
  ASSERT_TRUE(ops.EmbeddingForward(kCtx, want, tokens, wte, wpe).ok());
  Tensor dout = RandomTensor({b, t, c}, 5);
  Tensor dwte = *Tensor::Zeros({rows, c}, DType::kF32), dwpe = *Tensor::Zeros({8, c}, DType::kF32);
  ASSERT_TRUE(ops.EmbeddingBackward(kCtx, dwte, dwpe, dout, tokens).ok());

  std::vector<float> sum(b * t * c, 0.f);
  for (int s = 0; s < shards; ++s) {
    Tensor shard = *wte.Slice(0, s * w, (s + 1) * w).Contiguous();
    Tensor out = *Tensor::Empty({b, t, c}, DType::kF32);
    // Positions once in the sum: shard 0 adds them.
    ASSERT_TRUE(ops.VocabEmbeddingForward(kCtx, out, tokens, shard, s * w,
                                          s == 0 ? wpe : Tensor())
                    .ok());
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += out.data<float>()[i];
    Tensor dshard = *Tensor::Zeros({w, c}, DType::kF32);
    Tensor dpos = *Tensor::Zeros({8, c}, DType::kF32);
    ASSERT_TRUE(ops.VocabEmbeddingBackward(kCtx, dshard, dpos, dout, tokens, s * w).ok());
    EXPECT_EQ(Values(dshard), Values(*dwte.Slice(0, s * w, (s + 1) * w).Contiguous()));
    EXPECT_EQ(Values(dpos), Values(dwpe));
  }
  ExpectNear(sum, Values(want), 1e-6f, "embedding");
}

}  // namespace
}  // namespace weft::cpu
