// Blockwise attention against the whole-sequence kernel: the sequence is
// cut into zigzag chunks as context parallelism holds them, every rank's
// queries attend to every rank's K/V block in ring order, and the merged
// out, lse and the summed gradients must equal the unsplit kernel's.
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

// Chunks r and 2*cp-1-r of length len (the zigzag a cp rank holds).
TokenChunks Zigzag(int r, int cp, int64_t len) {
  TokenChunks c;
  c.chunk_len = len;
  c.count = 2;
  c.offsets[0] = r * len;
  c.offsets[1] = (2 * cp - 1 - r) * len;
  return c;
}

// Rows of `full` (B, T, W) at the chunks' positions -> (B, chunks.size(), W).
Tensor Gather(const Tensor& full, const TokenChunks& ch) {
  const int64_t b = full.dim(0), t = full.dim(1), w = full.dim(2);
  Tensor out = *Tensor::Empty({b, ch.size(), w}, DType::kF32);
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t r = 0; r < ch.size(); ++r) {
      const float* src = full.data<float>() + (i * t + ch.Position(r)) * w;
      std::copy(src, src + w, out.data<float>() + (i * ch.size() + r) * w);
    }
  }
  return out;
}

// Columns [c0, c1) of (B, T, W) as a contiguous (B, T, c1 - c0).
Tensor Columns(const Tensor& x, int64_t c0, int64_t c1) {
  const int64_t rows = x.dim(0) * x.dim(1), w = x.dim(2);
  Tensor out = *Tensor::Empty({x.dim(0), x.dim(1), c1 - c0}, DType::kF32);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(x.data<float>() + r * w + c0, x.data<float>() + r * w + c1,
              out.data<float>() + r * (c1 - c0));
  }
  return out;
}

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float tol,
                const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tol * std::max(1.f, std::fabs(b[i]))) << what << " at " << i;
  }
}

class AttentionBlockTest : public ::testing::TestWithParam<int> {};

TEST_P(AttentionBlockTest, RingOfZigzagBlocksEqualsFullAttention) {
  CpuKernelOps ops;
  const int cp = GetParam();
  const int64_t b = 2, len = 3, t = 2 * cp * len, c = 8, nh = 2;
  Tensor qkv = RandomTensor({b, t, 3 * c}, 7), dout = RandomTensor({b, t, c}, 8);
  Tensor out = *Tensor::Empty({b, t, c}, DType::kF32);
  Tensor lse = *Tensor::Empty({b, nh, t}, DType::kF32);
  ASSERT_TRUE(ops.AttentionForward(kCtx, out, lse, qkv, nh).ok());
  Tensor dqkv = *Tensor::Empty({b, t, 3 * c}, DType::kF32);
  ASSERT_TRUE(ops.AttentionBackward(kCtx, dqkv, dout, qkv, out, lse, nh).ok());

  // Gradients of each rank's K/V block, summed over every rank's queries.
  std::vector<Tensor> dkv(cp);
  for (int r = 0; r < cp; ++r) {
    dkv[r] = *Tensor::Zeros({b, 2 * len, 2 * c}, DType::kF32);
  }
  for (int r = 0; r < cp; ++r) {
    const TokenChunks mine = Zigzag(r, cp, len);
    Tensor q = Gather(qkv, mine);  // (B, 2 len, 3C)
    Tensor o = *Tensor::Empty({b, 2 * len, c}, DType::kF32);
    Tensor l = *Tensor::Empty({b, nh, 2 * len}, DType::kF32);
    for (int s = 0; s < cp; ++s) {  // ring order: own block first
      const int src = (r - s + cp) % cp;
      const TokenChunks theirs = Zigzag(src, cp, len);
      Tensor kv = Columns(Gather(qkv, theirs), c, 3 * c);  // (B, 2 len, 2C)
      ASSERT_TRUE(ops.AttentionBlockForward(kCtx, o, l, q, mine, kv, theirs, nh,
                                            /*accumulate=*/s > 0)
                      .ok());
    }
    ExpectNear(Values(o), Values(Gather(out, mine)), 1e-5f, "out of rank " + std::to_string(r));
    std::vector<float> want_lse;
    for (int64_t i = 0; i < b * nh; ++i) {
      for (int64_t k = 0; k < mine.size(); ++k) {
        want_lse.push_back(lse.data<float>()[i * t + mine.Position(k)]);
      }
    }
    ExpectNear(Values(l), want_lse, 1e-5f, "lse of rank " + std::to_string(r));

    Tensor go = Gather(dout, mine);
    Tensor dq = *Tensor::Zeros(q.shape(), DType::kF32);
    for (int s = 0; s < cp; ++s) {
      const int src = (r - s + cp) % cp;
      const TokenChunks theirs = Zigzag(src, cp, len);
      Tensor kv = Columns(Gather(qkv, theirs), c, 3 * c);
      ASSERT_TRUE(
          ops.AttentionBlockBackward(kCtx, dq, dkv[src], go, q, mine, kv, theirs, o, l, nh).ok());
    }
    ExpectNear(Values(Columns(dq, 0, c)), Values(Columns(Gather(dqkv, mine), 0, c)), 1e-4f,
               "dq of rank " + std::to_string(r));
  }
  for (int r = 0; r < cp; ++r) {
    ExpectNear(Values(dkv[r]), Values(Columns(Gather(dqkv, Zigzag(r, cp, len)), c, 3 * c)), 1e-4f,
               "dk/dv of rank " + std::to_string(r));
  }
}

INSTANTIATE_TEST_SUITE_P(RingSizes, AttentionBlockTest, ::testing::Values(1, 2, 3, 4));

TEST(AttentionBlockTest, KeysAfterEveryQueryLeaveRowsEmpty) {
  CpuKernelOps ops;
  const int64_t c = 4, nh = 1;
  Tensor q = RandomTensor({1, 2, 3 * c}, 1), kv = RandomTensor({1, 2, 2 * c}, 2);
  Tensor o = *Tensor::Empty({1, 2, c}, DType::kF32), l = *Tensor::Empty({1, nh, 2}, DType::kF32);
  ASSERT_TRUE(ops.AttentionBlockForward(kCtx, o, l, q, TokenChunks::Contiguous(2, 0), kv,
                                        TokenChunks::Contiguous(2, 5), nh, false)
                  .ok());
  for (float v : Values(o)) EXPECT_EQ(v, 0.f);
  for (float v : Values(l)) EXPECT_EQ(v, -INFINITY);
}

TEST(AttentionBlockTest, ChunksMustCoverTheBlock) {
  CpuKernelOps ops;
  const int64_t c = 4;
  Tensor q = RandomTensor({1, 4, 3 * c}, 1), kv = RandomTensor({1, 4, 2 * c}, 2);
  Tensor o = *Tensor::Empty({1, 4, c}, DType::kF32), l = *Tensor::Empty({1, 1, 4}, DType::kF32);
  const absl::Status s = ops.AttentionBlockForward(kCtx, o, l, q, TokenChunks::Contiguous(3), kv,
                                                   TokenChunks::Contiguous(4), 1, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace weft::cpu
