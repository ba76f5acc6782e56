// Flash-attention forward (FlashAttention-2 style) for bf16 on tensor cores.
//
// A block owns kBr query rows of one (batch, head), split over its warps by
// the FlashTiling (attention_internal.h): 4 warps of 16 rows (64 rows), 8
// warps of 16 (128) or 4 warps of 32 (128, two 16-row tiles a warp). It
// walks the key/value tiles of 64 keys up to the diagonal (causal),
// computing S = Q K^T with mma.sync, an online softmax in registers (running
// max m and sum l per row, in the log2 domain so exp is one exp2), and
// O += P V with P repacked straight from the S accumulators. Nothing of size
// T x T touches memory; logsumexp per row is saved for backward. K/V tiles
// are double-buffered: cp.async fetches tile kt + 1 while tile kt is
// multiplied, and fragments come from shared memory through ldmatrix (V
// through its .trans form, so V is never stored transposed). A 128-row
// block reads each K/V tile once for twice the rows (half the L2 traffic of
// 64-row blocks); 32 rows a warp also load each K/V fragment once for two
// products.
//
// Masking: where a tile reaches past a warp's first row, keys above the
// query are -inf; a tile wholly past the warp's last row is skipped. Keys at
// or past T only occur in the last tile, where they are also above every
// valid query, so the causal mask covers them. Query rows past T are
// computed on zeros and never stored.
#include "absl/strings/str_cat.h"
#include "core/kernels/cuda/attention_internal.h"
#include "core/kernels/cuda/attention_flash_tiles.cuh"
#include "core/kernels/cuda/attention_mma.cuh"
#include "core/kernels/cuda/common.cuh"

namespace weft::cuda {
namespace {

constexpr int kBc = kFlashTile;  // keys per tile
constexpr float kLog2e = 1.4426950408889634f;

// kWarps warps of kM 16-row tiles each: kBr = 16 * kWarps * kM query rows.
template <int HS, int kWarps, int kM>
struct FwdSmem {
  static constexpr int kBr = 16 * kWarps * kM;
  static constexpr int kLd = HS + 8;  // +8 bf16 (16 B) per row: conflict-free ldmatrix
  static constexpr int kQ = kBr * kLd;
  static constexpr int kKv = kBc * kLd;  // one K or V tile, row-major
  // Q, then two stages of (K, V): the next tile loads while this one is used.
  static constexpr int kBytes = (kQ + 4 * kKv) * 2;
};

// grid (B * NH, ceil(T / kBr)); the heaviest query tiles (largest qt) launch first.
template <int HS, int kWarps, int kM>
__global__ void __launch_bounds__(kWarps * kWarpSize)
    FlashForwardKernel(bf16* __restrict__ out, float* __restrict__ lse,
                       const bf16* __restrict__ qkv, int T, int NH, float scale_log2) {
  using S = FwdSmem<HS, kWarps, kM>;
  constexpr int kBr = S::kBr;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* q_s = reinterpret_cast<bf16*>(smem);  // [kBr][kLd]
  bf16* kv_s = q_s + S::kQ;                    // stage i: K at 2i * kKv, V at (2i+1) * kKv

  const int C = NH * HS;
  const int64_t ld = 3 * int64_t(C);
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int qt = gridDim.y - 1 - blockIdx.y;
  const int q0 = qt * kBr;
  const bf16* q_g = qkv + int64_t(b) * T * ld + h * HS;
  const bf16* k_g = q_g + C;
  const bf16* v_g = q_g + 2 * C;

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int g = lane >> 2, t = lane & 3;
  const int warp_row0 = q0 + warp * 16 * kM;  // the warp's rows: [warp_row0, +16 kM)
  const int warp_row_last = warp_row0 + 16 * kM - 1;
  // Key tiles up to the last live query of the block (causal).
  const int kt_last = (min(q0 + kBr, T) - 1) / kBc;

  LoadTileAsync<HS>(q_s, S::kLd, q_g, ld, q0, kBr, T);
  LoadTileAsync<HS>(kv_s, S::kLd, k_g, ld, 0, kBc, T);
  LoadTileAsync<HS>(kv_s + S::kKv, S::kLd, v_g, ld, 0, kBc, T);
  CpAsyncCommit();
  uint32_t qf[kM][HS / 16][4];

  float o[kM][HS / 8][4];
  // Per tile m, the thread's rows warp_row0 + 16m + g (elements 0-1) and + 8
  // (elements 2-3): running max (log2 units) and this thread's share of the
  // running sums.
  float m0[kM], m1[kM], l0[kM], l1[kM];
#pragma unroll
  for (int m = 0; m < kM; ++m) {
#pragma unroll
    for (int n = 0; n < HS / 8; ++n) o[m][n][0] = o[m][n][1] = o[m][n][2] = o[m][n][3] = 0.0f;
    m0[m] = m1[m] = -INFINITY;
    l0[m] = l1[m] = 0.0f;
  }

  for (int kt = 0; kt <= kt_last; ++kt) {
    const int k0 = kt * kBc;
    // Prefetch the next tile into the other stage (last read in iteration
    // kt - 1, which ended with a barrier), then wait for this one.
    PrefetchNextWaitCurrent(kt < kt_last, [&] {
      bf16* next = kv_s + ((kt + 1) & 1) * 2 * S::kKv;
      LoadTileAsync<HS>(next, S::kLd, k_g, ld, k0 + kBc, kBc, T);
      LoadTileAsync<HS>(next + S::kKv, S::kLd, v_g, ld, k0 + kBc, kBc, T);
      CpAsyncCommit();
    });
    __syncthreads();
    if (kt == 0) {
#pragma unroll
      for (int m = 0; m < kM; ++m) {
#pragma unroll
        for (int kk = 0; kk < HS / 16; ++kk) {
          LoadFragA(qf[m][kk], q_s, S::kLd, warp_row0 - q0 + 16 * m, kk * 16);
        }
      }
    }
    // A tile wholly above the warp's rows (keys past its last query) adds
    // nothing: the warp skips it (only in blocks of more than 64 rows).
    if (k0 <= warp_row_last) {
      const bf16* k_s = kv_s + (kt & 1) * 2 * S::kKv;
      const bf16* v_s = k_s + S::kKv;
      float s[kM][kBc / 8][4];
      ScoreTiles<HS, kBc, kM>(s, qf, k_s, S::kLd);
      // Keys above a row are masked in the block's last kBr / kBc tiles, the
      // ones that reach past its first row (earlier tiles hold only keys at
      // or below every row); keys at or past T are above every live row.
      const bool masked = kt + kBr / kBc > kt_last;
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        ScaleAndMaskScores<kBc>(s[m], warp_row0 + 16 * m + g, k0, masked, scale_log2);
        // Tile 0 gives every row a live key (key 0), so m is finite from
        // then on and a later row with all keys masked adds exp2(-inf) = 0.
        OnlineSoftmaxStep<HS, kBc>(s[m], m0[m], m1[m], l0[m], l1[m], o[m]);
      }
      AccumulateProducts<HS, kBc, kM>(o, s, v_s, S::kLd);  // O += P V
    }
    __syncthreads();  // the next iteration refills this stage with tile kt + 2
  }

#pragma unroll
  for (int m = 0; m < kM; ++m) {
    const int row0 = warp_row0 + 16 * m + g;
    const float s0 = GroupSum(l0[m]), s1 = GroupSum(l1[m]);
    StoreTileRows<HS>(out + (int64_t(b) * T + row0) * C + h * HS + 2 * t, 8 * int64_t(C),
                      row0 < T, row0 + 8 < T, o[m], 1.0f / s0, 1.0f / s1);
    StoreRowLse(lse + int64_t(bh) * T, row0, T, m0[m], m1[m], s0, s1);
  }
}

template <int HS, int kWarps, int kM>
absl::Status Launch(bf16* out, float* lse, const bf16* qkv, const AttentionDims& d,
                    cudaStream_t stream) {
  using S = FwdSmem<HS, kWarps, kM>;
  auto* kernel = FlashForwardKernel<HS, kWarps, kM>;
  // Above 48 KiB (HS = 128, or 128-row blocks) dynamic shared memory must be
  // opted into; the call is cheap, so it is made every launch rather than
  // cached per device.
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kBytes));
  const dim3 grid(static_cast<unsigned>(d.b * d.nh), static_cast<unsigned>(CeilDiv(d.t, S::kBr)));
  const float scale_log2 = kLog2e / sqrtf(static_cast<float>(HS));
  kernel<<<grid, kWarps * kWarpSize, S::kBytes, stream>>>(
      out, lse, qkv, static_cast<int>(d.t), static_cast<int>(d.nh), scale_log2);
  return CheckLaunch("FlashForwardKernel");
}

template <int HS>
absl::Status LaunchTiled(bf16* out, float* lse, const bf16* qkv, const AttentionDims& d,
                         FlashTiling tiling, cudaStream_t stream) {
  if (tiling == kFlashTiling4x16) return Launch<HS, 4, 1>(out, lse, qkv, d, stream);
  if (tiling == kFlashTiling8x16) return Launch<HS, 8, 1>(out, lse, qkv, d, stream);
  if constexpr (HS <= 64) {
    // Two 16-row tiles a warp keep twice the accumulators: HS <= 64 only.
    if (tiling == kFlashTiling4x32) return Launch<HS, 4, 2>(out, lse, qkv, d, stream);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("flash attention forward: no ", FlashTilingName(tiling), " tiling at head size ",
                   HS, "; expected 4x16 or 8x16 (and 4x32 at head size 32 or 64)"));
}

}  // namespace

absl::Status LaunchFlashForward(void* out, float* lse, const void* qkv, const AttentionDims& d,
                                FlashTiling tiling, cudaStream_t stream) {
  if (d.b * d.t * d.nh == 0) return absl::OkStatus();
  if (tiling.wgmma) {
    return LaunchFlashForwardWgmma(out, lse, qkv, d, tiling.warps / 4, tiling.n_major,
                                   tiling.pipelined, tiling.key_tile, stream);
  }
  bf16* o = static_cast<bf16*>(out);
  const bf16* x = static_cast<const bf16*>(qkv);
  switch (d.hs) {
    case 32: return LaunchTiled<32>(o, lse, x, d, tiling, stream);
    case 64: return LaunchTiled<64>(o, lse, x, d, tiling, stream);
    case 128: return LaunchTiled<128>(o, lse, x, d, tiling, stream);
  }
  return absl::InvalidArgumentError("flash attention needs head size 32, 64 or 128");
}

}  // namespace weft::cuda
