// Flash-attention backward for bf16 on tensor cores, deterministic.
//
// FlashAttention-2 accumulates dQ across key tiles with atomics, whose order
// varies run to run. Here two kernels each own their outputs instead:
//   FlashBackwardKVKernel: a block owns 64 keys and loops over the query
//     tiles at or below the diagonal, accumulating dK and dV in registers;
//   FlashBackwardQKernel: a block owns 64 or 128 queries (the backward
//     tiling 4x16 or 8x16: warps of 16 queries) and loops over the key
//     tiles of 64 up to the diagonal, accumulating dQ in registers.
// (The wgmma tilings run attention_flash_bwd_wgmma.cu instead.)
// Both recompute P = exp(S - lse) and dP = dO V^T (7 GEMM-equivalents instead
// of 5), and every output element is written once: bitwise-reproducible.
// The `fused-dq` tiling runs the KV kernel alone, in 5 products: each step
// stores its dS tile to shared memory, multiplies it by K and adds the
// product into an f32 dQ accumulator. The key tiles add into a query tile in
// ascending order, each waiting on that tile's semaphore for the one
// before, so the sum, too, is the same every run; the last (diagonal) key
// tile writes dQ as bf16.
//
// With S = scale * Q K^T, P = softmax(S), D_i = rowsum(dO_i * O_i):
//   dV = P^T dO,  dS = P * (dP - D),  dQ = scale * dS K,  dK = scale * dS^T Q.
// Operands of each product live in shared memory row-major, padded by 8 bf16
// per row; a product that needs the other orientation reads them through
// ldmatrix.trans. The tiles a loop walks over are double-buffered with
// cp.async, so the next tile loads while this one is multiplied.
#include "absl/strings/str_cat.h"
#include "core/kernels/cuda/attention_internal.h"
#include "core/kernels/cuda/attention_flash_tiles.cuh"
#include "core/kernels/cuda/attention_mma.cuh"
#include "core/kernels/cuda/common.cuh"

namespace weft::cuda {
namespace {

constexpr int kTile = kFlashTile;  // keys per KV block, queries per Q block, keys per KV step
constexpr int kKvThreads = 4 * kWarpSize;  // the KV kernel: 4 warps of 16 keys
constexpr float kLog2e = 1.4426950408889634f;

// fused-dq: the step's dS^T tile (64 keys x 64 queries, bf16, a key per row,
// padded like the others) and the block's ticket, after KvSmem's bytes.
constexpr int kDsLd = kTile + 8;
constexpr int kFusedExtraBytes = kTile * kDsLd * 2 + 16;
// Polls of a dQ semaphore before a block gives up (__trap: the launch fails
// with an error instead of hanging). A wait normally lasts a few steps.
constexpr int kMaxSemaphorePolls = 1 << 24;

// Adds the warp's 16 x HS share of a step's dQ product (f32 accumulators,
// rows r0 = 16 * warp + g and r0 + 8 of query tile qi, columns 2t + 8n)
// into the f32 accumulator acc (the tile's rows, HS apart), in key-tile
// order: key tile kj waits until the tile's semaphore counts the kj tiles
// before it, adds, and counts itself. The first key tile stores instead of
// adding; the last (kj == qi, the diagonal) writes dQ = scale * sum as bf16
// at out (row r of the tile at out + r * ld) instead of the accumulator.
// Returns whether it ended with a block barrier (after every shared-memory
// read of the step: the caller need not add its own).
template <int HS>
__device__ __forceinline__ bool AddDqInKeyOrder(const float (&dq)[HS / 8][4], float* acc,
                                                int* semaphore, int kj, int qi, int live_rows,
                                                bf16* out, int64_t ld, float scale) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int r0 = 16 * warp + (lane >> 2), t = lane & 3;
  const bool first = kj == 0, last = kj == qi;
  if (!first) {
    if (threadIdx.x == 0) {
      int polls = 0;
      while (*reinterpret_cast<volatile int*>(semaphore) != kj) {
        if (++polls == kMaxSemaphorePolls) __trap();
      }
      __threadfence();  // the earlier tiles' sums are read after the count
    }
    __syncthreads();
  }
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = r0 + 8 * half;
      if (r >= live_rows) continue;
      float2 sum = make_float2(dq[n][2 * half], dq[n][2 * half + 1]);
      float2* a = reinterpret_cast<float2*>(acc + r * HS + n * 8 + 2 * t);
      if (!first) {
        const float2 prev = __ldcg(a);  // through L2 (ld.cg): another block wrote it
        sum = make_float2(prev.x + sum.x, prev.y + sum.y);
      }
      if (last) {
        *reinterpret_cast<uint32_t*>(out + r * ld + n * 8 + 2 * t) =
            PackBf16(sum.x * scale, sum.y * scale);
      } else {
        *a = sum;
      }
    }
  }
  if (!last) {
    // Release: every thread's sums precede the barrier, and thread 0's
    // fence after it orders them (cumulatively) before the count, as the
    // reader's poll-fence-barrier orders its reads after it. One fence a
    // block, not one a thread.
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      atomicExch(semaphore, kj + 1);
    }
    return true;
  }
  return false;
}

// grid (B * NH, ceil(T / 64)); block y owns keys [64y, 64y + 64). With
// kFusedDq (HS <= 64, so a step is 64 queries) the block's keys come from a
// ticket instead (key tile ticket / (B * NH), head ticket % (B * NH)): a
// block then only waits for blocks with smaller tickets, which started
// before it, so the dQ semaphores cannot deadlock in any block order.
// sync[0] counts tickets, sync[1 + bh * ceil(T / 64) + qi] is query tile
// qi's semaphore; dq_acc is (B * NH, T, HS) f32. All zeroed by the launcher
// except dq_acc.
template <int HS, bool kFusedDq>
__global__ void __launch_bounds__(kKvThreads, kFusedDq ? 3 : 1)
    FlashBackwardKVKernel(bf16* __restrict__ dqkv, const bf16* __restrict__ dout,
                          const bf16* __restrict__ qkv, const float* __restrict__ lse,
                          const float* __restrict__ dsum, int T, int NH, float scale,
                          float scale_log2, float* __restrict__ dq_acc, int* __restrict__ sync) {
  using S = KvSmem<HS>;
  constexpr int kBr = S::kBr;
  static_assert(!kFusedDq || kBr == kTile, "fused dQ steps over query tiles of 64");
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* k_s = reinterpret_cast<bf16*>(smem);
  bf16* v_s = k_s + S::kK;
  bf16* qdo_s = v_s + S::kK;                                  // stage i: Q at 2i * kQ, dO next
  float* stat_s = reinterpret_cast<float*>(qdo_s + 4 * S::kQ);  // stage i: lse, D at 2i * kBr
  bf16* ds_s = reinterpret_cast<bf16*>(smem + S::kBytes);      // fused-dq: dS^T of the step

  int bh = blockIdx.x, key_tile = blockIdx.y;
  if constexpr (kFusedDq) {
    int* ticket_s = reinterpret_cast<int*>(ds_s + kTile * kDsLd);
    if (threadIdx.x == 0) *ticket_s = atomicAdd(sync, 1);
    __syncthreads();
    bh = *ticket_s % gridDim.x;
    key_tile = *ticket_s / gridDim.x;
  }
  const int C = NH * HS;
  const int64_t ld = 3 * int64_t(C);
  const int b = bh / NH, h = bh % NH;
  const int k0 = key_tile * kTile;
  const bf16* q_g = qkv + int64_t(b) * T * ld + h * HS;
  const bf16* do_g = dout + int64_t(b) * T * C + h * HS;
  const float* lse_g = lse + int64_t(bh) * T;
  const float* dsum_g = dsum + int64_t(bh) * T;

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int g = lane >> 2, t = lane & 3;
  const int key0 = k0 + warp * 16 + g;  // this thread's keys: key0 and key0 + 8

  // Starts loading the step at queries [q, q + kBr) into stage st.
  auto load_step = [&](int q, int st) {
    bf16* dst = qdo_s + st * 2 * S::kQ;
    LoadTileAsync<HS>(dst, S::kLd, q_g, ld, q, kBr, T);
    LoadTileAsync<HS>(dst + S::kQ, S::kLd, do_g, C, q, kBr, T);
    CpAsyncCommit();
    float* stat = stat_s + st * 2 * kBr;
    for (int r = threadIdx.x; r < kBr; r += kKvThreads) {
      const bool live = q + r < T;
      stat[r] = live ? lse_g[q + r] * kLog2e : 0.0f;  // log2 units
      stat[kBr + r] = live ? dsum_g[q + r] : 0.0f;
    }
  };

  LoadTileAsync<HS>(k_s, S::kLd, q_g + C, ld, k0, kTile, T);
  LoadTileAsync<HS>(v_s, S::kLd, q_g + 2 * C, ld, k0, kTile, T);
  load_step(k0, 0);

  float dk[HS / 8][4], dv[HS / 8][4];
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.0f;
  }

  // Query tiles below k0 are entirely masked (query < key).
  for (int q0 = k0, step = 0; q0 < T; q0 += kBr, ++step) {
    const int st = step & 1;
    // The other stage was last read before the previous barrier.
    PrefetchNextWaitCurrent(q0 + kBr < T, [&] { load_step(q0 + kBr, st ^ 1); });
    __syncthreads();
    const bf16* q_s = qdo_s + st * 2 * S::kQ;
    const bf16* do_s = q_s + S::kQ;
    const float* lse_s = stat_s + st * 2 * kBr;
    const float* d_s = lse_s + kBr;

    // S^T (16 keys x kBr queries) = K Q^T and dP^T = V dO^T.
    float p[kBr / 8][4], ds[kBr / 8][4];
    DualTileProduct<HS, kBr>(p, ds, k_s, v_s, S::kLd, warp * 16, q_s, do_s, S::kLd);
    // P^T = exp2(S^T * scale * log2e - lse * log2e); dS^T = P^T * (dP^T - D).
    KvStepGradients<kBr>(p, ds, key0, q0, T, lse_s, d_s, scale_log2);
    // dV += P^T dO and dK += dS^T Q (k dimension: the step's queries).
    AccumulateDualProduct<HS, kBr>(dv, p, do_s, dk, ds, q_s, S::kLd);
    if constexpr (kFusedDq) {
      // dS^T to shared memory (the bf16 the dK product used), then the
      // warp's 16 queries of dQ = dS K over the block's 64 keys.
      const int krow = warp * 16 + g;
#pragma unroll
      for (int n = 0; n < kBr / 8; ++n) {
        *reinterpret_cast<uint32_t*>(ds_s + krow * kDsLd + n * 8 + 2 * t) =
            PackBf16(ds[n][0], ds[n][1]);
        *reinterpret_cast<uint32_t*>(ds_s + (krow + 8) * kDsLd + n * 8 + 2 * t) =
            PackBf16(ds[n][2], ds[n][3]);
      }
      __syncthreads();
      float dq[HS / 8][4];
#pragma unroll
      for (int n = 0; n < HS / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        uint32_t a[4];
        LoadFragATrans(a, ds_s, kDsLd, warp * 16, kk * 16);
#pragma unroll
        for (int n = 0; n < HS / 8; ++n) {
          uint32_t bf[2];
          LoadFragBTrans(bf, k_s, S::kLd, kk * 16, n * 8);
          MmaBf16(dq[n], a, bf);
        }
      }
      const int qi = q0 / kTile, tiles = gridDim.y;
      const bool synced = AddDqInKeyOrder<HS>(
          dq, dq_acc + (int64_t(bh) * T + q0) * HS, sync + 1 + bh * tiles + qi, key_tile, qi,
          min(kTile, T - q0), dqkv + (int64_t(b) * T + q0) * ld + h * HS, ld, scale);
      if (synced) continue;  // its release barrier already follows every read of the stage
    }
    __syncthreads();  // the next step refills this stage
  }

  bf16* dk0 = dqkv + (int64_t(b) * T + key0) * ld + C + h * HS + 2 * t;
  StoreTileRows<HS>(dk0, 8 * ld, key0 < T, key0 + 8 < T, dk, scale, scale);
  StoreTileRows<HS>(dk0 + C, 8 * ld, key0 < T, key0 + 8 < T, dv, 1.0f, 1.0f);
}

// grid (B * NH, ceil(T / kBr)); block y owns the kBr = 16 * kWarps queries
// of tile (gridDim.y-1-y), so the longest rows (near the end of the
// sequence) start first. Warp w owns queries [16w, 16w + 16) of the block.
template <int HS, int kWarps>
__global__ void __launch_bounds__(kWarps * kWarpSize)
    FlashBackwardQKernel(bf16* __restrict__ dqkv, const bf16* __restrict__ dout,
                         const bf16* __restrict__ qkv, const float* __restrict__ lse,
                         const float* __restrict__ dsum, int T, int NH, float scale,
                         float scale_log2) {
  constexpr int kBr = 16 * kWarps;
  using S = QSmem<HS, kBr>;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* q_s = reinterpret_cast<bf16*>(smem);
  bf16* do_s = q_s + S::kQ;
  bf16* kv_s = do_s + S::kQ;  // stage i: K at 2i * kKv, V next

  const int C = NH * HS;
  const int64_t ld = 3 * int64_t(C);
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int qt = gridDim.y - 1 - blockIdx.y;
  const int q0 = qt * kBr;
  const bf16* q_g = qkv + int64_t(b) * T * ld + h * HS;

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = q0 + warp * 16 + g;  // this thread's queries: row0 and row0 + 8
  const int warp_row_last = q0 + warp * 16 + 15;
  const int kt_last = (min(q0 + kBr, T) - 1) / kTile;  // key tiles up to the last live query

  auto load_kv = [&](int k, int st) {
    bf16* dst = kv_s + st * 2 * S::kKv;
    LoadTileAsync<HS>(dst, S::kLd, q_g + C, ld, k, kTile, T);
    LoadTileAsync<HS>(dst + S::kKv, S::kLd, q_g + 2 * C, ld, k, kTile, T);
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

  float dq[HS / 8][4];
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

  for (int kt = 0; kt <= kt_last; ++kt) {
    const int k0 = kt * kTile;
    // The other stage was last read before the previous barrier.
    PrefetchNextWaitCurrent(kt < kt_last, [&] { load_kv(k0 + kTile, (kt + 1) & 1); });
    __syncthreads();
    // A key tile wholly past the warp's last query adds nothing (only in
    // blocks of more than 64 queries): the warp skips it.
    if (k0 <= warp_row_last) {
      const bf16* k_s = kv_s + (kt & 1) * 2 * S::kKv;
      const bf16* v_s = k_s + S::kKv;

      // S = Q K^T and dP = dO V^T (16 queries x 64 keys per warp).
      float p[kTile / 8][4], ds[kTile / 8][4];
      DualTileProduct<HS, kTile>(p, ds, q_s, do_s, S::kLd, warp * 16, k_s, v_s, S::kLd);
      QTileGradients<kTile>(p, ds, row0, k0, T, lse0, lse1, d0, d1, scale_log2);
      // dQ += dS K (k dimension: this tile's keys; B is K read through .trans).
      AccumulateProduct<HS, kTile>(dq, ds, k_s, S::kLd);
    }
    __syncthreads();  // the next iteration refills this stage
  }

  StoreTileRows<HS>(dqkv + (int64_t(b) * T + row0) * ld + h * HS + 2 * t, 8 * ld, row0 < T,
                    row0 + 8 < T, dq, scale, scale);
}

template <int HS, int kQWarps>
absl::Status Launch(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                    const float* dsum, const AttentionDims& d, cudaStream_t stream) {
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  const float scale_log2 = scale * kLog2e;
  const int T = static_cast<int>(d.t), NH = static_cast<int>(d.nh);
  const auto bh = static_cast<unsigned>(d.b * d.nh);
  // Over 48 KiB of dynamic shared memory needs an explicit opt-in.
  constexpr int kKvBytes = KvSmem<HS>::kBytes;
  auto* kv_kernel = FlashBackwardKVKernel<HS, false>;
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kKvBytes));
  const dim3 kv_grid(bh, static_cast<unsigned>(CeilDiv(d.t, kTile)));
  kv_kernel<<<kv_grid, kKvThreads, kKvBytes, stream>>>(dqkv, dout, qkv, lse, dsum, T, NH, scale,
                                                       scale_log2, nullptr, nullptr);
  WEFT_RETURN_IF_ERROR(CheckLaunch("FlashBackwardKVKernel"));
  constexpr int kQRows = 16 * kQWarps;
  constexpr int kQBytes = QSmem<HS, kQRows>::kBytes;
  auto* q_kernel = FlashBackwardQKernel<HS, kQWarps>;
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(q_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kQBytes));
  const dim3 q_grid(bh, static_cast<unsigned>(CeilDiv(d.t, kQRows)));
  q_kernel<<<q_grid, kQWarps * kWarpSize, kQBytes, stream>>>(dqkv, dout, qkv, lse, dsum, T, NH,
                                                             scale, scale_log2);
  return CheckLaunch("FlashBackwardQKernel");
}

// Where the fused-dq tiling's semaphores start in its workspace: after the
// dQ accumulator, rounded up to 16 bytes.
int64_t FusedSyncOffset(const AttentionDims& d) { return CeilDiv(d.b * d.nh * d.t * d.hs, 4) * 4; }

template <int HS>
absl::Status LaunchFusedDq(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                           const float* dsum, float* workspace, const AttentionDims& d,
                           cudaStream_t stream) {
  if (workspace == nullptr) {
    return absl::InvalidArgumentError(
        "flash attention backward fused-dq: no workspace; expected "
        "FlashBackwardWorkspaceFloats floats (attention.h's scratch size counts them)");
  }
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  const float scale_log2 = scale * kLog2e;
  const int T = static_cast<int>(d.t), NH = static_cast<int>(d.nh);
  const auto bh = static_cast<unsigned>(d.b * d.nh);
  const auto tiles = static_cast<unsigned>(CeilDiv(d.t, kTile));
  int* sync = reinterpret_cast<int*>(workspace + FusedSyncOffset(d));
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(sync, 0, (int64_t(bh) * tiles + 1) * sizeof(int), stream));
  constexpr int kBytes = KvSmem<HS>::kBytes + kFusedExtraBytes;
  auto* kernel = FlashBackwardKVKernel<HS, true>;
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
  kernel<<<dim3(bh, tiles), kKvThreads, kBytes, stream>>>(dqkv, dout, qkv, lse, dsum, T, NH, scale,
                                                          scale_log2, workspace, sync);
  return CheckLaunch("FlashBackwardKVKernel (fused dQ)");
}

template <int HS>
absl::Status LaunchTiled(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                         const float* dsum, const AttentionDims& d, FlashTiling bwd_tiling,
                         cudaStream_t stream) {
  if (bwd_tiling == kFlashTiling4x16) return Launch<HS, 4>(dqkv, dout, qkv, lse, dsum, d, stream);
  if (bwd_tiling == kFlashTiling8x16) return Launch<HS, 8>(dqkv, dout, qkv, lse, dsum, d, stream);
  return absl::InvalidArgumentError(
      absl::StrCat("flash attention backward: no ", FlashTilingName(bwd_tiling),
                   " tiling; expected 4x16, 8x16, wgmma-64 or wgmma-128"));
}

}  // namespace

int64_t FlashBackwardWorkspaceFloats(const AttentionDims& d, FlashTiling bwd_tiling) {
  if (!bwd_tiling.fused_dq) return 0;
  return FusedSyncOffset(d) + CeilDiv(d.b * d.nh * CeilDiv(d.t, kTile) + 1, 4) * 4;
}

absl::Status LaunchFlashBackward(void* dqkv, const void* dout, const void* qkv, const float* lse,
                                 const float* dsum, float* workspace, const AttentionDims& d,
                                 FlashTiling bwd_tiling, cudaStream_t stream) {
  if (d.b * d.t * d.nh == 0) return absl::OkStatus();
  if (bwd_tiling.key_tile != kFlashTile) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flash attention backward: ", FlashTilingName(bwd_tiling),
        " is a forward tiling (the backward takes 64-key tiles); use it without -k",
        bwd_tiling.key_tile));
  }
  if (bwd_tiling.wgmma) {
    return LaunchFlashBackwardWgmma(dqkv, dout, qkv, lse, dsum, d, bwd_tiling.warps / 4,
                                    bwd_tiling.n_major, bwd_tiling.pipelined, stream);
  }
  bf16* dx = static_cast<bf16*>(dqkv);
  const bf16* dy = static_cast<const bf16*>(dout);
  const bf16* x = static_cast<const bf16*>(qkv);
  if (bwd_tiling.fused_dq) {
    switch (d.hs) {
      case 32: return LaunchFusedDq<32>(dx, dy, x, lse, dsum, workspace, d, stream);
      case 64: return LaunchFusedDq<64>(dx, dy, x, lse, dsum, workspace, d, stream);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "flash attention backward fused-dq takes head size 32 or 64, not ", d.hs,
        "; use 4x16 or 8x16 (unset WEFT_FLASH_BWD_TILING)"));
  }
  switch (d.hs) {
    case 32: return LaunchTiled<32>(dx, dy, x, lse, dsum, d, bwd_tiling, stream);
    case 64: return LaunchTiled<64>(dx, dy, x, lse, dsum, d, bwd_tiling, stream);
    case 128: return LaunchTiled<128>(dx, dy, x, lse, dsum, d, bwd_tiling, stream);
  }
  return absl::InvalidArgumentError("flash attention needs head size 32, 64 or 128");
}

}  // namespace weft::cuda
