// CPU-vs-CUDA parity for blockwise (ring) attention: zigzag chunks of
// cp = 3 ranks, every rank's queries against every K/V block in ring order
// (forward merged into out/lse, backward accumulated into dq and dK/dV), in
// f32 and bf16. bf16 with head sizes 32, 64 and 128 runs the tensor-core
// kernels (attention_flash_block_*.cu): chunks longer than their 64-row
// tiles and not a multiple of them, so tiles straddle chunk ends.
#include "core/kernels/cuda/parity_util.h"
#include "gtest/gtest.h"

namespace weft::cuda::testing {
namespace {

constexpr Tolerance kBf16Tol{2e-2f, 2e-2f};

TokenChunks Zigzag(int r, int cp, int64_t len) {
  TokenChunks c;
  c.chunk_len = len;
  c.count = 2;
  c.offsets[0] = r * len;
  c.offsets[1] = (2 * cp - 1 - r) * len;
  return c;
}

void CheckRing(DType dt, int64_t hs = 32, int64_t len = 5) {
  SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " hs=" << hs << " len=" << len);
  const int cp = 3, nh = 2;
  const int64_t b = 2, tl = 2 * len, c = nh * hs;
  const Tolerance tol = dt == DType::kBF16 ? kBf16Tol : kF32ReduceTol;
  std::vector<std::vector<float>> qkv(cp), kv(cp), dout(cp);
  for (int r = 0; r < cp; ++r) {
    qkv[r] = RoundTo(dt, Random(b * tl * 3 * c, 10 + r));
    kv[r] = RoundTo(dt, Random(b * tl * 2 * c, 20 + r));
    dout[r] = RoundTo(dt, Random(b * tl * c, 30 + r));
  }
  const Shape q_shape{b, tl, 3 * c}, kv_shape{b, tl, 2 * c}, o_shape{b, tl, c}, l_shape{b, nh, tl};
  std::vector<Tensor> cdkv(cp), gdkv(cp);
  for (int r = 0; r < cp; ++r) {
    cdkv[r] = Host(std::vector<float>(b * tl * 2 * c), kv_shape);
    gdkv[r] = GpuZeros(kv_shape, dt);
  }
  for (int r = 0; r < cp; ++r) {
    const TokenChunks mine = Zigzag(r, cp, len);
    Tensor cq = Host(qkv[r], q_shape), gq = Gpu(qkv[r], q_shape, dt);
    Tensor co = Host(std::vector<float>(b * tl * c), o_shape), go = GpuZeros(o_shape, dt);
    Tensor cl = Host(std::vector<float>(b * nh * tl), l_shape);
    Tensor gl = GpuZeros(l_shape, DType::kF32);
    for (int s = 0; s < cp; ++s) {
      const int src = (r - s + cp) % cp;
      const TokenChunks theirs = Zigzag(src, cp, len);
      ASSERT_TRUE(CpuOps()
                      .AttentionBlockForward(kCpuCtx, co, cl, cq, mine, Host(kv[src], kv_shape),
                                             theirs, nh, s > 0)
                      .ok());
      const absl::Status st = GpuOps().AttentionBlockForward(
          GpuCtx(), go, gl, gq, mine, Gpu(kv[src], kv_shape, dt), theirs, nh, s > 0);
      ASSERT_TRUE(st.ok()) << st;
    }
    EXPECT_TRUE(Close(Floats(go), Floats(co), tol)) << "out of rank " << r;
    EXPECT_TRUE(Close(Floats(gl), Floats(cl), tol)) << "lse of rank " << r;
    Tensor cdq = Host(std::vector<float>(qkv[r].size()), q_shape), gdq = GpuZeros(q_shape, dt);
    for (int s = 0; s < cp; ++s) {
      const int src = (r - s + cp) % cp;
      const TokenChunks theirs = Zigzag(src, cp, len);
      ASSERT_TRUE(CpuOps()
                      .AttentionBlockBackward(kCpuCtx, cdq, cdkv[src], Host(dout[r], o_shape), cq,
                                              mine, Host(kv[src], kv_shape), theirs, co, cl, nh)
                      .ok());
      const absl::Status st =
          GpuOps().AttentionBlockBackward(GpuCtx(), gdq, gdkv[src], Gpu(dout[r], o_shape, dt), gq,
                                          mine, Gpu(kv[src], kv_shape, dt), theirs, go, gl, nh);
      ASSERT_TRUE(st.ok()) << st;
    }
    EXPECT_TRUE(Close(Floats(gdq), Floats(cdq), tol)) << "dq of rank " << r;
  }
  for (int r = 0; r < cp; ++r) {
    EXPECT_TRUE(Close(Floats(gdkv[r]), Floats(cdkv[r]), tol)) << "dk/dv of block " << r;
  }
}

TEST(AttentionBlockCudaTest, RingMatchesCpuF32) { CheckRing(DType::kF32); }
TEST(AttentionBlockCudaTest, RingMatchesCpuBf16) { CheckRing(DType::kBF16); }
TEST(AttentionBlockCudaTest, TensorCoreTilesAcrossChunkEnds) {
  CheckRing(DType::kBF16, 64, 70);
  CheckRing(DType::kBF16, 128, 40);
  CheckRing(DType::kBF16, 32, 130);
}

}  // namespace
}  // namespace weft::cuda::testing
