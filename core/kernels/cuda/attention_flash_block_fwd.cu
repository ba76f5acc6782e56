// Blockwise (ring) attention forward on tensor cores: the flash forward's
// tiling (attention_flash_fwd.cu) for one rank's queries against one K/V
// block, with the causal mask taken from global positions (TokenChunks)
// and the result merged into the running (out, lse) by the log-sum-exp
// rule. bf16, HS in {32, 64, 128}; the warp-per-row kernels of
// attention_block.cu take every other case.
//
// Differences from the self-attention kernel:
//   - q, k and v come from separate strided tensors (q_ld, kv_ld, k_col,
//     v_col), with Tq query rows and Tk key rows.
//   - Key tiles past every query of the block are skipped; a tile is
//     masked element by element unless every key precedes every query (and
//     both tiles are whole) (attention_flash_block.cuh).
//   - A query row may see no key of the block: its running max stays -inf,
//     its sum 0, and the block's lse for it is -inf, which the merge treats
//     as "nothing to add".
#include "core/kernels/cuda/attention_flash_block.cuh"
#include "core/kernels/cuda/attention_internal.h"
#include "core/kernels/cuda/attention_flash_tiles.cuh"
#include "core/kernels/cuda/attention_mma.cuh"
#include "core/kernels/cuda/common.cuh"

namespace weft::cuda {
namespace {

constexpr int kTile = kRingTile;
constexpr int kThreads = kRingThreads;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int HS>
struct FwdSmem {
  static constexpr int kLd = HS + 8;  // +16 B per row: conflict-free ldmatrix
  static constexpr int kRows = kTile * kLd;
  // Q, then two stages of (K, V).
  static constexpr int kBytes = 5 * kRows * 2;
};

// grid (B * NH, ceil(Tq / 64)): a block owns 64 query rows of one head.
template <int HS>
__global__ void __launch_bounds__(kThreads)
    FlashBlockForwardKernel(bf16* __restrict__ out, float* __restrict__ lse,
                            const bf16* __restrict__ q, const bf16* __restrict__ kv,
                            BlockOperands p, float scale_log2, bool accumulate) {
  using S = FwdSmem<HS>;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* q_s = reinterpret_cast<bf16*>(smem);
  bf16* kv_s = q_s + S::kRows;  // stage i: K at 2i * kRows, V at (2i + 1) * kRows

  const int C = p.nh * HS;
  const int bh = blockIdx.x, b = bh / p.nh, h = bh % p.nh;
  const int q0 = blockIdx.y * kTile;
  const bf16* q_g = q + int64_t(b) * p.tq * p.q_ld + h * HS;
  const bf16* k_g = kv + int64_t(b) * p.tk * p.kv_ld + p.k_col + h * HS;
  const bf16* v_g = kv + int64_t(b) * p.tk * p.kv_ld + p.v_col + h * HS;

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = q0 + warp * 16 + g;  // this thread's rows: row0 and row0 + 8
  // Rows past Tq see nothing (position -1).
  const int64_t pos0 = row0 < p.tq ? PositionOf(p.qc, row0) : -1;
  const int64_t pos1 = row0 + 8 < p.tq ? PositionOf(p.qc, row0 + 8) : -1;
  const bool whole_q = q0 + kTile <= p.tq;
  int64_t q_lo, q_hi;
  TileRange(p.qc, q0, kTile, p.tq, q_lo, q_hi);

  const int ntiles = (p.tk + kTile - 1) / kTile;
  int kt = NextKeyTile(p, 0, ntiles, q_hi);
  LoadTileAsync<HS>(q_s, S::kLd, q_g, p.q_ld, q0, kTile, p.tq);
  if (kt < ntiles) {
    LoadTileAsync<HS>(kv_s, S::kLd, k_g, p.kv_ld, kt * kTile, kTile, p.tk);
    LoadTileAsync<HS>(kv_s + S::kRows, S::kLd, v_g, p.kv_ld, kt * kTile, kTile, p.tk);
  }
  CpAsyncCommit();

  uint32_t qf[HS / 16][4];
  float o[HS / 8][4];
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY;  // running max (log2 units) of rows row0, row0 + 8
  float l0 = 0.0f, l1 = 0.0f;            // this thread's share of the running sums

  for (int stage = 0, first = 1; kt < ntiles; stage ^= 1, first = 0) {
    const int k0 = kt * kTile;
    const int next = NextKeyTile(p, kt + 1, ntiles, q_hi);
    // Prefetch the next visible tile into the other stage (last read in the
    // previous iteration, which ended with a barrier), then wait for this one.
    PrefetchNextWaitCurrent(next < ntiles, [&] {
      bf16* dst = kv_s + (stage ^ 1) * 2 * S::kRows;
      LoadTileAsync<HS>(dst, S::kLd, k_g, p.kv_ld, next * kTile, kTile, p.tk);
      LoadTileAsync<HS>(dst + S::kRows, S::kLd, v_g, p.kv_ld, next * kTile, kTile, p.tk);
      CpAsyncCommit();
    });
    __syncthreads();
    if (first) {
#pragma unroll
      for (int kk = 0; kk < HS / 16; ++kk) LoadFragA(qf[kk], q_s, S::kLd, warp * 16, kk * 16);
    }
    const bf16* k_s = kv_s + stage * 2 * S::kRows;
    const bf16* v_s = k_s + S::kRows;

    float s[kTile / 8][4];
    ScoreTile<HS, kTile>(s, qf, k_s, S::kLd);
    int64_t k_lo, k_hi;
    TileRange(p.kc, k0, kTile, p.tk, k_lo, k_hi);
    // Every key before every query, both tiles whole: nothing to mask.
    const bool masked = !(whole_q && k0 + kTile <= p.tk && k_hi <= q_lo);
    ScaleAndMaskScores<kTile>(s, scale_log2, [&](int col, bool& live0, bool& live1) {
      const int key = k0 + col;
      const int64_t kpos = key < p.tk ? PositionOf(p.kc, key) : INT64_MAX;
      live0 = !(masked && kpos > pos0);
      live1 = !(masked && kpos > pos1);
    });
    OnlineSoftmaxStep<HS, kTile>(s, m0, m1, l0, l1, o);
    AccumulateProduct<HS, kTile>(o, s, v_s, S::kLd);  // O += P V
    __syncthreads();  // the next iteration refills this stage
    kt = next;
  }
  CpAsyncWait<0>();  // the Q tile's copy when no key tile was visible

  l0 = GroupSum(l0);
  l1 = GroupSum(l1);
  // This block's lse per row (natural log), -inf where no key was seen, and
  // the running one it merges into.
  const float lb0 = l0 > 0.0f ? (m0 + log2f(l0)) * kLn2 : -INFINITY;
  const float lb1 = l1 > 0.0f ? (m1 + log2f(l1)) * kLn2 : -INFINITY;
  float* lse_row = lse + int64_t(bh) * p.tq;
  const float la0 = accumulate && row0 < p.tq ? lse_row[row0] : -INFINITY;
  const float la1 = accumulate && row0 + 8 < p.tq ? lse_row[row0 + 8] : -INFINITY;
  float wa0, wb0, merged0, wa1, wb1, merged1;
  MergeWeights(la0, lb0, wa0, wb0, merged0);
  MergeWeights(la1, lb1, wa1, wb1, merged1);
  const float f0 = l0 > 0.0f ? wb0 / l0 : 0.0f, f1 = l1 > 0.0f ? wb1 / l1 : 0.0f;
  bf16* out0 = out + (int64_t(b) * p.tq + row0) * C + h * HS + 2 * t;
  bf16* out1 = out0 + 8 * int64_t(C);
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) {
    if (row0 < p.tq) {
      uint32_t* at = reinterpret_cast<uint32_t*>(out0 + n * 8);
      float a0 = 0.0f, a1 = 0.0f;
      if (wa0 > 0.0f) {
        a0 = ToF(out0[n * 8]) * wa0;
        a1 = ToF(out0[n * 8 + 1]) * wa0;
      }
      *at = PackBf16(a0 + o[n][0] * f0, a1 + o[n][1] * f0);
    }
    if (row0 + 8 < p.tq) {
      uint32_t* at = reinterpret_cast<uint32_t*>(out1 + n * 8);
      float a0 = 0.0f, a1 = 0.0f;
      if (wa1 > 0.0f) {
        a0 = ToF(out1[n * 8]) * wa1;
        a1 = ToF(out1[n * 8 + 1]) * wa1;
      }
      *at = PackBf16(a0 + o[n][2] * f1, a1 + o[n][3] * f1);
    }
  }
  __syncwarp();  // every lane of the group has read the old lse
  if (t == 0) {
    if (row0 < p.tq) lse_row[row0] = merged0;
    if (row0 + 8 < p.tq) lse_row[row0 + 8] = merged1;
  }
}

template <int HS>
absl::Status LaunchForward(bf16* out, float* lse, const bf16* q, const bf16* kv,
                           const BlockOperands& p, int64_t batch, bool accumulate,
                           cudaStream_t stream) {
  constexpr int kBytes = FwdSmem<HS>::kBytes;
  WEFT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
      FlashBlockForwardKernel<HS>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
  const dim3 grid(static_cast<unsigned>(batch * p.nh),
                  static_cast<unsigned>((p.tq + kTile - 1) / kTile));
  const float scale_log2 = kLog2e / sqrtf(static_cast<float>(HS));
  FlashBlockForwardKernel<HS><<<grid, kThreads, kBytes, stream>>>(out, lse, q, kv, p,
                                                                  scale_log2, accumulate);
  return CheckLaunch("FlashBlockForwardKernel");
}

}  // namespace

bool FlashBlockAttentionApplies(DType dtype, const BlockAttentionArgs& a,
                                std::initializer_list<const void*> pointers) {
  // The self-attention kernels' conditions, and rows that start 16-byte
  // aligned for the tile copies and packed stores.
  return FlashAttentionApplies(dtype, a.hs, pointers) && a.q_width % 8 == 0 &&
         a.kv_width % 8 == 0 && a.tq < (int64_t{1} << 31) && a.tk < (int64_t{1} << 31);
}

absl::Status LaunchFlashBlockForward(void* out, float* lse, const void* q, const void* kv,
                                     const BlockAttentionArgs& a, bool accumulate,
                                     cudaStream_t stream) {
  if (a.b * a.nh * a.tq == 0) return absl::OkStatus();
  const BlockOperands p = OperandsOf(a);
  bf16* o = static_cast<bf16*>(out);
  const bf16* qq = static_cast<const bf16*>(q);
  const bf16* x = static_cast<const bf16*>(kv);
  switch (a.hs) {
    case 32: return LaunchForward<32>(o, lse, qq, x, p, a.b, accumulate, stream);
    case 64: return LaunchForward<64>(o, lse, qq, x, p, a.b, accumulate, stream);
    case 128: return LaunchForward<128>(o, lse, qq, x, p, a.b, accumulate, stream);
  }
  return absl::InvalidArgumentError("flash block attention needs head size 32, 64 or 128");
}

}  // namespace weft::cuda
