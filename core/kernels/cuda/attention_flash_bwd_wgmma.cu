// Flash-attention backward on Hopper's warpgroup tensor cores (sm_90a
// wgmma), bf16, head sizes 32 and 64: the deterministic two-kernel scheme of
// attention_flash_bwd.cu (each output element written once, by the block
// that owns it) with every product issued as wgmma.mma_async over a
// warpgroup's 64 rows (layouts and fences: wgmma.cuh).
//
//   KV kernel: a block (one warpgroup) owns 64 keys; K and V fragments stay
//     in registers as the A operands. Per query step of 64:
//       S^T = K Q^T, dP^T = V dO^T   B = Q, dO tiles in the core-matrix
//                                    layout (cp.async straight into it)
//       P^T, dS^T                    in registers (lse and D per query)
//       dV += P^T dO, dK += dS^T Q   A = P^T, dS^T repacked; B = dO^T, Q^T,
//                                    transposed from the core tiles with
//                                    ldmatrix.trans
//   Q kernel: a block owns 64 * kGroups queries (warpgroup wg the rows
//     [64 wg, +64)); Q and dO fragments stay in registers. Per key tile:
//       S = Q K^T, dP = dO V^T       B = K, V tiles (core layout)
//       dS                           in registers
//       dQ += dS K                   B = K^T, transposed from the K tile
// With kNMajor (tilings wgmma-*-nmajor) the second products read dO, Q and
// K N-major, straight from their core tiles, through the instruction's
// transpose bit: no transposes, one barrier less per step.
// Tiles are double-buffered with cp.async; each product is waited for at
// once. Masking and skipping follow the mma.sync kernels. Head size 128
// would need its dK/dV accumulators and K/V fragments in more registers
// than a thread has (A from shared memory instead): it stays on mma.sync.
// Built for sm_90a only (other targets compile a trap; the dispatch offers
// the wgmma backward only on compute capability 9.0).
#include "absl/strings/str_cat.h"
#include "core/kernels/cuda/attention_flash_tiles.cuh"
#include "core/kernels/cuda/attention_internal.h"
#include "core/kernels/cuda/attention_mma.cuh"
#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/wgmma.cuh"

namespace weft::cuda {
namespace {

constexpr int kTile = kFlashTile;  // keys per KV block and key tile, queries per KV step
constexpr float kLog2e = 1.4426950408889634f;

template <int HS, bool kNMajor>
struct WgKvSmem {
  static constexpr int kLd = HS + 8;
  static constexpr int kRowMajor = kTile * kLd;  // K or V of the block, row-major
  static constexpr int kCore = kTile * HS;       // one 64 x HS tile, core layout
  // K, V; two stages of (Q, dO) core tiles; Q^T and dO^T (core layout,
  // HS x 64; not with kNMajor); then two stages of (lse, D) floats.
  static constexpr int kElems = 2 * kRowMajor + 4 * kCore + (kNMajor ? 0 : 2 * kCore);
  static constexpr int kBytes = kElems * 2 + 4 * kTile * 4;
};

template <int HS, bool kNMajor>
__global__ void __launch_bounds__(128)
    FlashBackwardKVWgmmaKernel(bf16* __restrict__ dqkv, const bf16* __restrict__ dout,
                               const bf16* __restrict__ qkv, const float* __restrict__ lse,
                               const float* __restrict__ dsum, int T, int NH, float scale,
                               float scale_log2) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma exists on sm_90a only; the dispatch never launches this elsewhere
#else
  using S = WgKvSmem<HS, kNMajor>;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* k_s = reinterpret_cast<bf16*>(smem);
  bf16* v_s = k_s + S::kRowMajor;
  bf16* qdo_s = v_s + S::kRowMajor;          // stage i: Q core at 2i * kCore, dO core next
  bf16* qt_s = qdo_s + 4 * S::kCore;         // Q^T, core layout (HS x 64)
  bf16* dot_s = qt_s + S::kCore;             // dO^T
  // Stage i: lse, D at 2i * 64.
  float* stat_s = reinterpret_cast<float*>(qdo_s + (S::kElems - 2 * S::kRowMajor));

  const int C = NH * HS;
  const int64_t ld = 3 * int64_t(C);
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int k0 = blockIdx.y * kTile;
  const bf16* q_g = qkv + int64_t(b) * T * ld + h * HS;
  const bf16* do_g = dout + int64_t(b) * T * C + h * HS;
  const float* lse_g = lse + int64_t(bh) * T;
  const float* dsum_g = dsum + int64_t(bh) * T;

  // Broadcast from lane 0 so the compiler knows the warp index is uniform
  // across the warp (else it serializes the wgmma: attention_flash_fwd_wgmma.cu).
  const int warp = __shfl_sync(0xffffffffu, threadIdx.x / kWarpSize, 0);
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane >> 2, t = lane & 3;
  const int key0 = k0 + warp * 16 + g;  // this thread's keys: key0 and key0 + 8

  // Starts loading the query step [q, q + 64) into stage st.
  auto load_step = [&](int q, int st) {
    bf16* dst = qdo_s + st * 2 * S::kCore;
    LoadCoreTileAsync<HS>(dst, q_g, ld, q, kTile, T);
    LoadCoreTileAsync<HS>(dst + S::kCore, do_g, C, q, kTile, T);
    CpAsyncCommit();
    // Threads 0-63 load lse (in log2 units), 64-127 D: one value each,
    // without a branch (a divergent path here would make the compiler
    // serialize the wgmma that follow).
    const int r = threadIdx.x % kTile;
    const bool is_lse = threadIdx.x < kTile;
    const int row = min(q + r, T - 1);
    const float v = is_lse ? lse_g[row] * kLog2e : dsum_g[row];
    stat_s[st * 2 * kTile + threadIdx.x] = q + r < T ? v : 0.0f;
  };

  LoadTileAsync<HS>(k_s, S::kLd, q_g + C, ld, k0, kTile, T);
  LoadTileAsync<HS>(v_s, S::kLd, q_g + 2 * C, ld, k0, kTile, T);
  load_step(k0, 0);

  uint32_t kf[HS / 16][4], vf[HS / 16][4];
  float dk[HS / 8][4], dv[HS / 8][4];
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.0f;
  }

  // Query steps below k0 are entirely masked (query < key).
  for (int q0 = k0, step = 0; q0 < T; q0 += kTile, ++step) {
    const int st = step & 1;
    if (q0 + kTile < T) {
      load_step(q0 + kTile, st ^ 1);  // that stage was last read before the previous barrier
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    if constexpr (kNMajor) FenceProxyAsync();  // the step's cp.async tiles, for wgmma
    __syncthreads();
    if (step == 0) {
#pragma unroll
      for (int kk = 0; kk < HS / 16; ++kk) {
        LoadFragA(kf[kk], k_s, S::kLd, warp * 16, kk * 16);
        LoadFragA(vf[kk], v_s, S::kLd, warp * 16, kk * 16);
      }
    }
    const bf16* q_core = qdo_s + st * 2 * S::kCore;
    const bf16* do_core = q_core + S::kCore;
    const float* lse_s = stat_s + st * 2 * kTile;
    const float* d_s = lse_s + kTile;
    if constexpr (!kNMajor) {
      TransposeToCoreLayout<kTile, HS, true>(qt_s, q_core, 0);
      TransposeToCoreLayout<kTile, HS, true>(dot_s, do_core, 0);
      FenceProxyAsync();  // the step's cp.async tiles and the transposes, for wgmma
      __syncthreads();
    }

    // S^T (64 keys x 64 queries) = K Q^T and dP^T = V dO^T.
    float p[kTile / 8][4], ds[kTile / 8][4];
    WgmmaDualTileProduct<kTile, HS>(p, kf, q_core, ds, vf, do_core);
    // P^T = exp2(S^T * scale * log2e - lse * log2e); dS^T = P^T * (dP^T - D).
    KvStepGradients<kTile>(p, ds, key0, q0, T, lse_s, d_s, scale_log2);
    // dV += P^T dO and dK += dS^T Q (k dimension: the step's queries).
    if constexpr (kNMajor) {
      WgmmaDualAccumulate<HS, kTile, true>(dv, p, do_core, dk, ds, q_core);
    } else {
      WgmmaDualAccumulate<HS, kTile>(dv, p, dot_s, dk, ds, qt_s);
    }
    __syncthreads();  // the next step refills the other stage and rewrites Q^T, dO^T
  }

  bf16* dk0 = dqkv + (int64_t(b) * T + key0) * ld + C + h * HS + 2 * t;
  StoreTileRows<HS>(dk0, 8 * ld, key0 < T, key0 + 8 < T, dk, scale, scale);
  StoreTileRows<HS>(dk0 + C, 8 * ld, key0 < T, key0 + 8 < T, dv, 1.0f, 1.0f);
#endif
}

template <int HS, int kGroups, bool kNMajor>
struct WgQSmem {
  static constexpr int kBr = 64 * kGroups;
  static constexpr int kLd = HS + 8;
  static constexpr int kRowMajor = kBr * kLd;  // Q or dO of the block, row-major
  static constexpr int kCore = kTile * HS;     // one K or V tile, core layout
  // Q, dO; two stages of (K, V) core tiles; K^T (core layout, HS x 64; not
  // with kNMajor).
  static constexpr int kElems = 2 * kRowMajor + 4 * kCore + (kNMajor ? 0 : kCore);
  static constexpr int kBytes = kElems * 2;
};

// grid (B * NH, ceil(T / kBr)); block y owns query tile (gridDim.y-1-y).
template <int HS, int kGroups, bool kNMajor>
__global__ void __launch_bounds__(kGroups * 128)
    FlashBackwardQWgmmaKernel(bf16* __restrict__ dqkv, const bf16* __restrict__ dout,
                              const bf16* __restrict__ qkv, const float* __restrict__ lse,
                              const float* __restrict__ dsum, int T, int NH, float scale,
                              float scale_log2) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();
#else
  using S = WgQSmem<HS, kGroups, kNMajor>;
  constexpr int kBr = S::kBr;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* q_s = reinterpret_cast<bf16*>(smem);
  bf16* do_s = q_s + S::kRowMajor;
  bf16* kv_s = do_s + S::kRowMajor;  // stage i: K core at 2i * kCore, V core next
  bf16* kt_s = kv_s + 4 * S::kCore;  // K^T of the current tile, core layout

  const int C = NH * HS;
  const int64_t ld = 3 * int64_t(C);
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int qt = gridDim.y - 1 - blockIdx.y;
  const int q0 = qt * kBr;
  const bf16* q_g = qkv + int64_t(b) * T * ld + h * HS;

  // Broadcast from lane 0 so the compiler knows the warp index is uniform
  // across the warp (else it serializes the wgmma: attention_flash_fwd_wgmma.cu).
  const int warp = __shfl_sync(0xffffffffu, threadIdx.x / kWarpSize, 0);
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane >> 2, t = lane & 3;
  const int group_row0 = q0 + (warp / 4) * 64;  // the warpgroup's queries: [group_row0, +64)
  const int row0 = group_row0 + (warp % 4) * 16 + g;  // this thread's: row0 and row0 + 8
  const int kt_last = (min(q0 + kBr, T) - 1) / kTile;

  auto load_kv = [&](int k, int st) {
    bf16* dst = kv_s + st * 2 * S::kCore;
    LoadCoreTileAsync<HS>(dst, q_g + C, ld, k, kTile, T);
    LoadCoreTileAsync<HS>(dst + S::kCore, q_g + 2 * C, ld, k, kTile, T);
    CpAsyncCommit();
  };
  LoadTileAsync<HS>(q_s, S::kLd, q_g, ld, q0, kBr, T);
  LoadTileAsync<HS>(do_s, S::kLd, dout + int64_t(b) * T * C + h * HS, C, q0, kBr, T);
  load_kv(0, 0);
  const float* lse_g = lse + int64_t(bh) * T;
  const float* dsum_g = dsum + int64_t(bh) * T;
  const float lse0 = row0 < T ? lse_g[row0] * kLog2e : 0.0f;
  const float lse1 = row0 + 8 < T ? lse_g[row0 + 8] * kLog2e : 0.0f;
  const float d0 = row0 < T ? dsum_g[row0] : 0.0f;
  const float d1 = row0 + 8 < T ? dsum_g[row0 + 8] : 0.0f;

  uint32_t qf[HS / 16][4], dof[HS / 16][4];
  float dq[HS / 8][4];
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

  for (int kt = 0; kt <= kt_last; ++kt) {
    const int k0 = kt * kTile;
    const int st = kt & 1;
    if (kt < kt_last) {
      load_kv(k0 + kTile, st ^ 1);  // that stage was last read before the previous barrier
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    if constexpr (kNMajor) FenceProxyAsync();  // the tile's cp.async, for wgmma
    __syncthreads();
    if (kt == 0) {
#pragma unroll
      for (int kk = 0; kk < HS / 16; ++kk) {
        LoadFragA(qf[kk], q_s, S::kLd, group_row0 - q0 + (warp % 4) * 16, kk * 16);
        LoadFragA(dof[kk], do_s, S::kLd, group_row0 - q0 + (warp % 4) * 16, kk * 16);
      }
    }
    const bf16* k_core = kv_s + st * 2 * S::kCore;
    const bf16* v_core = k_core + S::kCore;
    if constexpr (!kNMajor) {
      TransposeToCoreLayout<kTile, HS, true>(kt_s, k_core, 0);
      FenceProxyAsync();  // the tile's cp.async and K^T, for wgmma
      __syncthreads();
    }

    if (k0 <= group_row0 + 63) {  // uniform across the warpgroup
      // S = Q K^T and dP = dO V^T (the warpgroup's 64 queries x 64 keys).
      float p[kTile / 8][4], ds[kTile / 8][4];
      WgmmaDualTileProduct<kTile, HS>(p, qf, k_core, ds, dof, v_core);
      QTileGradients<kTile>(p, ds, row0, k0, T, lse0, lse1, d0, d1, scale_log2);
      // dQ += dS K (k dimension: this tile's keys; B = K^T).
      WgmmaAccumulate<HS, kTile, kNMajor>(dq, ds, kNMajor ? k_core : kt_s);
    }
    __syncthreads();  // the next iteration refills stage st with tile kt + 2 and rewrites K^T
  }

  StoreTileRows<HS>(dqkv + (int64_t(b) * T + row0) * ld + h * HS + 2 * t, 8 * ld, row0 < T,
                    row0 + 8 < T, dq, scale, scale);
#endif
}

template <int HS, int kGroups, bool kNMajor>
absl::Status Launch(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                    const float* dsum, const AttentionDims& d, cudaStream_t stream) {
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  const float scale_log2 = scale * kLog2e;
  const int T = static_cast<int>(d.t), NH = static_cast<int>(d.nh);
  const auto bh = static_cast<unsigned>(d.b * d.nh);
  constexpr int kKvBytes = WgKvSmem<HS, kNMajor>::kBytes;
  auto* kv_kernel = FlashBackwardKVWgmmaKernel<HS, kNMajor>;
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kKvBytes));
  const dim3 kv_grid(bh, static_cast<unsigned>(CeilDiv(d.t, kTile)));
  kv_kernel<<<kv_grid, 128, kKvBytes, stream>>>(dqkv, dout, qkv, lse, dsum, T, NH, scale,
                                                scale_log2);
  WEFT_RETURN_IF_ERROR(CheckLaunch("FlashBackwardKVWgmmaKernel"));
  using QS = WgQSmem<HS, kGroups, kNMajor>;
  auto* q_kernel = FlashBackwardQWgmmaKernel<HS, kGroups, kNMajor>;
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(q_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, QS::kBytes));
  const dim3 q_grid(bh, static_cast<unsigned>(CeilDiv(d.t, QS::kBr)));
  q_kernel<<<q_grid, kGroups * 128, QS::kBytes, stream>>>(dqkv, dout, qkv, lse, dsum, T, NH,
                                                          scale, scale_log2);
  return CheckLaunch("FlashBackwardQWgmmaKernel");
}

template <int HS>
absl::Status LaunchGroups(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                          const float* dsum, const AttentionDims& d, int groups, bool n_major,
                          cudaStream_t stream) {
  if (groups == 1 && !n_major) return Launch<HS, 1, false>(dqkv, dout, qkv, lse, dsum, d, stream);
  if (groups == 2 && !n_major) return Launch<HS, 2, false>(dqkv, dout, qkv, lse, dsum, d, stream);
  if (groups == 1 && n_major) return Launch<HS, 1, true>(dqkv, dout, qkv, lse, dsum, d, stream);
  if (groups == 2 && n_major) return Launch<HS, 2, true>(dqkv, dout, qkv, lse, dsum, d, stream);
  return absl::InvalidArgumentError(
      absl::StrCat("flash attention wgmma backward: ", groups, " warpgroups; expected 1 or 2"));
}

}  // namespace

absl::Status LaunchFlashBackwardWgmma(void* dqkv, const void* dout, const void* qkv,
                                      const float* lse, const float* dsum,
                                      const AttentionDims& d, int q_warpgroups, bool n_major,
                                      cudaStream_t stream) {
  if (d.b * d.t * d.nh == 0) return absl::OkStatus();
  bf16* dx = static_cast<bf16*>(dqkv);
  const bf16* dy = static_cast<const bf16*>(dout);
  const bf16* x = static_cast<const bf16*>(qkv);
  switch (d.hs) {
    case 32: return LaunchGroups<32>(dx, dy, x, lse, dsum, d, q_warpgroups, n_major, stream);
    case 64: return LaunchGroups<64>(dx, dy, x, lse, dsum, d, q_warpgroups, n_major, stream);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "flash attention wgmma backward: head size ", d.hs,
      "; expected 32 or 64 (128 runs on the mma.sync tilings 4x16 or 8x16)"));
}

}  // namespace weft::cuda
