// Blockwise (ring) attention backward on tensor cores: the two deterministic
// kernels of attention_flash_bwd.cu (one owns 64 keys and loops over query
// steps for dK and dV, the other owns 64 queries and loops over key tiles
// for dQ) for one rank's queries against one K/V block. As in the forward
// (attention_flash_block_fwd.cu), the causal mask is by global position,
// tile pairs with every key after every query are skipped, and q, kv, dq
// and dkv are separate strided tensors. Results are added (dq +=, dkv +=):
// each block of the ring contributes its share. P is recomputed from the
// merged lse of the whole ring; a row whose lse is -inf (it saw no key at
// all) contributes nothing.
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

// A row's lse in log2 units for P = exp2(S * scale_log2 - lse): +inf for a
// row past t or one that saw no key (lse -inf), so that its P is 0.
__device__ __forceinline__ float Log2Lse(const float* lse_row, int r, int t) {
  if (r >= t) return INFINITY;
  const float l = lse_row[r];
  return l == -INFINITY ? INFINITY : l * kLog2e;
}

// dst[0..1] += (a, b), rounded once to bf16 like the warp-per-row kernels.
__device__ __forceinline__ void AddPair(bf16* dst, float a, float b) {
  uint32_t* at = reinterpret_cast<uint32_t*>(dst);
  *at = PackBf16(ToF(dst[0]) + a, ToF(dst[1]) + b);
}

// grid (B * NH, ceil(Tk / 64)); block y owns keys [64y, 64y + 64).
template <int HS>
__global__ void __launch_bounds__(kThreads)
    FlashBlockBackwardKVKernel(bf16* __restrict__ dkv, const bf16* __restrict__ dout,
                               const bf16* __restrict__ q, const bf16* __restrict__ kv,
                               const float* __restrict__ lse, const float* __restrict__ dsum,
                               BlockOperands p, float scale, float scale_log2) {
  using S = KvSmem<HS>;
  constexpr int kBr = S::kBr;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* k_s = reinterpret_cast<bf16*>(smem);
  bf16* v_s = k_s + S::kK;
  bf16* qdo_s = v_s + S::kK;                                  // stage i: Q at 2i * kQ, dO next
  float* stat_s = reinterpret_cast<float*>(qdo_s + 4 * S::kQ);  // stage i: lse, D at 2i * kBr

  const int C = p.nh * HS;
  const int bh = blockIdx.x, b = bh / p.nh, h = bh % p.nh;
  const int k0 = blockIdx.y * kTile;
  const bf16* q_g = q + int64_t(b) * p.tq * p.q_ld + h * HS;
  const bf16* do_g = dout + int64_t(b) * p.tq * C + h * HS;
  const bf16* kv_g = kv + int64_t(b) * p.tk * p.kv_ld + h * HS;
  const float* lse_g = lse + int64_t(bh) * p.tq;
  const float* dsum_g = dsum + int64_t(bh) * p.tq;

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int g = lane >> 2, t = lane & 3;
  const int key0 = k0 + warp * 16 + g;  // this thread's keys: key0 and key0 + 8
  // Keys past Tk are seen by no query.
  const int64_t kpos0 = key0 < p.tk ? PositionOf(p.kc, key0) : INT64_MAX;
  const int64_t kpos1 = key0 + 8 < p.tk ? PositionOf(p.kc, key0 + 8) : INT64_MAX;
  const bool whole_k = k0 + kTile <= p.tk;
  int64_t k_lo, k_hi;
  TileRange(p.kc, k0, kTile, p.tk, k_lo, k_hi);

  // Starts loading the step at queries [q0, q0 + kBr) into stage st.
  auto load_step = [&](int q0, int st) {
    bf16* dst = qdo_s + st * 2 * S::kQ;
    LoadTileAsync<HS>(dst, S::kLd, q_g, p.q_ld, q0, kBr, p.tq);
    LoadTileAsync<HS>(dst + S::kQ, S::kLd, do_g, C, q0, kBr, p.tq);
    CpAsyncCommit();
    float* stat = stat_s + st * 2 * kBr;
    for (int r = threadIdx.x; r < kBr; r += kThreads) {
      stat[r] = Log2Lse(lse_g, q0 + r, p.tq);
      stat[kBr + r] = q0 + r < p.tq ? dsum_g[q0 + r] : 0.0f;
    }
  };

  LoadTileAsync<HS>(k_s, S::kLd, kv_g + p.k_col, p.kv_ld, k0, kTile, p.tk);
  LoadTileAsync<HS>(v_s, S::kLd, kv_g + p.v_col, p.kv_ld, k0, kTile, p.tk);
  int q0 = NextQueryStep(p, 0, kBr, k_lo);
  if (q0 < p.tq) {
    load_step(q0, 0);
  } else {
    CpAsyncCommit();
  }

  float dk[HS / 8][4], dv[HS / 8][4];
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.0f;
  }

  for (int st = 0; q0 < p.tq; st ^= 1) {
    const int next = NextQueryStep(p, q0 + kBr, kBr, k_lo);
    // The other stage was last read before the previous barrier.
    PrefetchNextWaitCurrent(next < p.tq, [&] { load_step(next, st ^ 1); });
    __syncthreads();
    const bf16* q_s = qdo_s + st * 2 * S::kQ;
    const bf16* do_s = q_s + S::kQ;
    const float* lse_s = stat_s + st * 2 * kBr;
    const float* d_s = lse_s + kBr;

    // S^T (16 keys x kBr queries) = K Q^T and dP^T = V dO^T.
    float pt[kBr / 8][4], ds[kBr / 8][4];
    DualTileProduct<HS, kBr>(pt, ds, k_s, v_s, S::kLd, warp * 16, q_s, do_s, S::kLd);
    int64_t q_lo, q_hi;
    TileRange(p.qc, q0, kBr, p.tq, q_lo, q_hi);
    // Every key at or before every query, both tiles whole: no mask. (Rows
    // past Tq and rows that saw nothing have P = 0 through their lse.)
    const bool masked = !(whole_k && q0 + kBr <= p.tq && k_hi <= q_lo);
    // P^T = exp2(S^T * scale_log2 - lse * log2e); dS^T = P^T * (dP^T - D).
    KvStepGradients<kBr>(pt, ds, lse_s, d_s, scale_log2, [&](int qi, bool& live0, bool& live1) {
      live0 = live1 = true;
      if (masked) {
        const int64_t qpos = q0 + qi < p.tq ? PositionOf(p.qc, q0 + qi) : -1;
        live0 = kpos0 <= qpos;
        live1 = kpos1 <= qpos;
      }
    });
    // dV += P^T dO and dK += dS^T Q (k dimension: the step's queries).
    AccumulateDualProduct<HS, kBr>(dv, pt, do_s, dk, ds, q_s, S::kLd);
    __syncthreads();  // the next step refills this stage
    q0 = next;
  }
  CpAsyncWait<0>();  // K and V were loaded even when no step was visible

  bf16* dk0 = dkv + (int64_t(b) * p.tk + key0) * p.kv_ld + p.k_col + h * HS + 2 * t;
  bf16* dv0 = dkv + (int64_t(b) * p.tk + key0) * p.kv_ld + p.v_col + h * HS + 2 * t;
  const int64_t down = 8 * p.kv_ld;
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) {
    if (key0 < p.tk) {
      AddPair(dk0 + n * 8, dk[n][0] * scale, dk[n][1] * scale);
      AddPair(dv0 + n * 8, dv[n][0], dv[n][1]);
    }
    if (key0 + 8 < p.tk) {
      AddPair(dk0 + down + n * 8, dk[n][2] * scale, dk[n][3] * scale);
      AddPair(dv0 + down + n * 8, dv[n][2], dv[n][3]);
    }
  }
}

// grid (B * NH, ceil(Tq / 64)); block y owns queries [64y, 64y + 64).
template <int HS>
__global__ void __launch_bounds__(kThreads)
    FlashBlockBackwardQKernel(bf16* __restrict__ dq, const bf16* __restrict__ dout,
                              const bf16* __restrict__ q, const bf16* __restrict__ kv,
                              const float* __restrict__ lse, const float* __restrict__ dsum,
                              BlockOperands p, float scale, float scale_log2) {
  using S = QSmem<HS, kTile>;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* q_s = reinterpret_cast<bf16*>(smem);
  bf16* do_s = q_s + S::kQ;
  bf16* kv_s = do_s + S::kQ;  // stage i: K at 2i * kKv, V next

  const int C = p.nh * HS;
  const int bh = blockIdx.x, b = bh / p.nh, h = bh % p.nh;
  const int q0 = blockIdx.y * kTile;
  const bf16* q_g = q + int64_t(b) * p.tq * p.q_ld + h * HS;
  const bf16* kv_g = kv + int64_t(b) * p.tk * p.kv_ld + h * HS;

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = q0 + warp * 16 + g;  // this thread's queries: row0 and row0 + 8
  const int64_t pos0 = row0 < p.tq ? PositionOf(p.qc, row0) : -1;
  const int64_t pos1 = row0 + 8 < p.tq ? PositionOf(p.qc, row0 + 8) : -1;
  const bool whole_q = q0 + kTile <= p.tq;
  int64_t q_lo, q_hi;
  TileRange(p.qc, q0, kTile, p.tq, q_lo, q_hi);

  auto load_kv = [&](int k, int st) {
    bf16* dst = kv_s + st * 2 * S::kKv;
    LoadTileAsync<HS>(dst, S::kLd, kv_g + p.k_col, p.kv_ld, k, kTile, p.tk);
    LoadTileAsync<HS>(dst + S::kKv, S::kLd, kv_g + p.v_col, p.kv_ld, k, kTile, p.tk);
  };
  const int ntiles = (p.tk + kTile - 1) / kTile;
  int kt = NextKeyTile(p, 0, ntiles, q_hi);
  LoadTileAsync<HS>(q_s, S::kLd, q_g, p.q_ld, q0, kTile, p.tq);
  LoadTileAsync<HS>(do_s, S::kLd, dout + int64_t(b) * p.tq * C + h * HS, C, q0, kTile, p.tq);
  if (kt < ntiles) load_kv(kt * kTile, 0);
  CpAsyncCommit();
  const float* lse_g = lse + int64_t(bh) * p.tq;
  const float* dsum_g = dsum + int64_t(bh) * p.tq;
  const float lse0 = Log2Lse(lse_g, row0, p.tq), lse1 = Log2Lse(lse_g, row0 + 8, p.tq);
  const float d0 = row0 < p.tq ? dsum_g[row0] : 0.0f;
  const float d1 = row0 + 8 < p.tq ? dsum_g[row0 + 8] : 0.0f;

  float acc[HS / 8][4];
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;

  for (int st = 0; kt < ntiles; st ^= 1) {
    const int k0 = kt * kTile;
    const int next = NextKeyTile(p, kt + 1, ntiles, q_hi);
    // The other stage was last read before the previous barrier.
    PrefetchNextWaitCurrent(next < ntiles, [&] {
      load_kv(next * kTile, st ^ 1);
      CpAsyncCommit();
    });
    __syncthreads();
    const bf16* k_s = kv_s + st * 2 * S::kKv;
    const bf16* v_s = k_s + S::kKv;

    // S = Q K^T and dP = dO V^T (16 queries x 64 keys per warp).
    float s[kTile / 8][4], ds[kTile / 8][4];
    DualTileProduct<HS, kTile>(s, ds, q_s, do_s, S::kLd, warp * 16, k_s, v_s, S::kLd);
    int64_t k_lo, k_hi;
    TileRange(p.kc, k0, kTile, p.tk, k_lo, k_hi);
    const bool masked = !(whole_q && k0 + kTile <= p.tk && k_hi <= q_lo);
    QTileGradients<kTile>(s, ds, lse0, lse1, d0, d1, scale_log2,
                          [&](int col, bool& live0, bool& live1) {
                            live0 = live1 = true;
                            if (masked) {
                              const int key = k0 + col;
                              const int64_t kpos = key < p.tk ? PositionOf(p.kc, key) : INT64_MAX;
                              live0 = kpos <= pos0;
                              live1 = kpos <= pos1;
                            }
                          });
    // dQ += dS K (k dimension: this tile's keys; B is K read through .trans).
    AccumulateProduct<HS, kTile>(acc, ds, k_s, S::kLd);
    __syncthreads();  // the next iteration refills this stage
    kt = next;
  }
  CpAsyncWait<0>();  // Q and dO were loaded even when no key tile was visible

  bf16* dq0 = dq + (int64_t(b) * p.tq + row0) * p.q_ld + h * HS + 2 * t;
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) {
    if (row0 < p.tq) AddPair(dq0 + n * 8, acc[n][0] * scale, acc[n][1] * scale);
    if (row0 + 8 < p.tq) {
      AddPair(dq0 + 8 * p.q_ld + n * 8, acc[n][2] * scale, acc[n][3] * scale);
    }
  }
}

template <int HS>
absl::Status LaunchBackward(bf16* dq, bf16* dkv, const bf16* dout, const bf16* q, const bf16* kv,
                            const float* lse, const float* dsum, const BlockOperands& p,
                            int64_t batch, cudaStream_t stream) {
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  const float scale_log2 = scale * kLog2e;
  const unsigned heads = static_cast<unsigned>(batch * p.nh);
  if (p.tk > 0) {
    WEFT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(FlashBlockBackwardKVKernel<HS>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   KvSmem<HS>::kBytes));
    const dim3 grid(heads, static_cast<unsigned>((p.tk + kTile - 1) / kTile));
    FlashBlockBackwardKVKernel<HS><<<grid, kThreads, KvSmem<HS>::kBytes, stream>>>(
        dkv, dout, q, kv, lse, dsum, p, scale, scale_log2);
    WEFT_RETURN_IF_ERROR(CheckLaunch("FlashBlockBackwardKVKernel"));
  }
  if (p.tq > 0) {
    WEFT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(FlashBlockBackwardQKernel<HS>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   QSmem<HS, kTile>::kBytes));
    const dim3 grid(heads, static_cast<unsigned>((p.tq + kTile - 1) / kTile));
    FlashBlockBackwardQKernel<HS><<<grid, kThreads, QSmem<HS, kTile>::kBytes, stream>>>(
        dq, dout, q, kv, lse, dsum, p, scale, scale_log2);
    WEFT_RETURN_IF_ERROR(CheckLaunch("FlashBlockBackwardQKernel"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LaunchFlashBlockBackward(void* dq, void* dkv, const void* dout, const void* q,
                                      const void* kv, const float* lse, const float* dsum,
                                      const BlockAttentionArgs& a, cudaStream_t stream) {
  if (a.b * a.nh == 0) return absl::OkStatus();
  const BlockOperands p = OperandsOf(a);
  bf16* dqb = static_cast<bf16*>(dq);
  bf16* dkvb = static_cast<bf16*>(dkv);
  const bf16* dy = static_cast<const bf16*>(dout);
  const bf16* qq = static_cast<const bf16*>(q);
  const bf16* x = static_cast<const bf16*>(kv);
  switch (a.hs) {
    case 32: return LaunchBackward<32>(dqb, dkvb, dy, qq, x, lse, dsum, p, a.b, stream);
    case 64: return LaunchBackward<64>(dqb, dkvb, dy, qq, x, lse, dsum, p, a.b, stream);
    case 128: return LaunchBackward<128>(dqb, dkvb, dy, qq, x, lse, dsum, p, a.b, stream);
  }
  return absl::InvalidArgumentError("flash block attention needs head size 32, 64 or 128");
}

}  // namespace weft::cuda
