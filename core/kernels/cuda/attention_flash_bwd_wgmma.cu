// Flash-attention backward on Hopper's warpgroup tensor cores (sm_90a
// wgmma), bf16, head sizes 32 and 64: the deterministic two-kernel scheme of
// attention_flash_bwd.cu (each output element written once, by the block
// that owns it) with every product issued as wgmma.mma_async over a
// warpgroup's 64 rows (layouts and fences: wgmma.cuh).
//
//   KV kernel: a block of kGroups warpgroups owns 64 * kGroups keys
//     (warpgroup wg the keys [64 wg, +64)), every warpgroup multiplying the
//     same Q and dO tiles; K and V fragments stay in registers as the A
//     operands. Per query step of 64 (from the block's first key on: a
//     second warpgroup's first step lies above its keys and adds zeros):
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
// once, or with kPipelined (tilings wgmma-*-pipe) a step's first products
// run while the previous step's accumulations do, and its gradients while
// they finish (as in attention_flash_fwd_wgmma.cu): step j issues S_j, dP_j
// and the accumulations of step j - 1 together, waits for the first two,
// computes step j's gradients, then waits for the rest. The accumulators
// see the same operations in the same order, so the results keep their
// bits; the operands of step j - 1 stay resident one step longer (a third
// stage N-major, two transposed tiles otherwise). Masking and skipping
// follow the mma.sync kernels (pipelined, the dQ kernel computes the key
// tiles above a warpgroup's rows too, masked to zero, so that every wgmma
// is issued on every path: for finite K, dq keeps its bits). Head size 128
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

template <int HS, int kGroups, bool kNMajor, bool kPipelined>
struct WgKvSmem {
  static constexpr int kKeys = 64 * kGroups;     // keys of a block
  static constexpr int kLd = HS + 8;
  static constexpr int kRowMajor = kKeys * kLd;  // K or V of the block, row-major
  static constexpr int kCore = kTile * HS;       // one 64 x HS tile, core layout
  // (Q, dO) core tiles and (lse, D) stages: N-major and pipelined, step
  // j - 1's are read in place while step j + 1's stream in, so three.
  static constexpr int kStages = kNMajor && kPipelined ? 3 : 2;
  // (Q^T, dO^T) pairs (core layout, HS x 64): pipelined, step j's are
  // written while step j - 1's are read, so two.
  static constexpr int kTransposed = kNMajor ? 0 : (kPipelined ? 2 : 1);
  // K, V; the (Q, dO) stages; the (Q^T, dO^T) pairs; then the (lse, D)
  // stages as floats (one copy per warpgroup: each thread writes one value,
  // so no thread needs a branch).
  static constexpr int kElems = 2 * kRowMajor + 2 * kStages * kCore + 2 * kTransposed * kCore;
  static constexpr int kStat = 2 * kTile * kGroups;  // floats of one (lse, D) stage
  static constexpr int kBytes = kElems * 2 + kStages * kStat * 4;
};

template <int HS, int kGroups, bool kNMajor, bool kPipelined>
__global__ void __launch_bounds__(kGroups * 128)
    FlashBackwardKVWgmmaKernel(bf16* __restrict__ dqkv, const bf16* __restrict__ dout,
                               const bf16* __restrict__ qkv, const float* __restrict__ lse,
                               const float* __restrict__ dsum, int T, int NH, float scale,
                               float scale_log2) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma exists on sm_90a only; the dispatch never launches this elsewhere
#else
  using S = WgKvSmem<HS, kGroups, kNMajor, kPipelined>;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* k_s = reinterpret_cast<bf16*>(smem);
  bf16* v_s = k_s + S::kRowMajor;
  bf16* qdo_s = v_s + S::kRowMajor;                   // stage i: Q core at 2i * kCore, dO next
  bf16* tr_s = qdo_s + 2 * S::kStages * S::kCore;     // pair i: Q^T at 2i * kCore, dO^T next
  // Stage i, warpgroup g: lse at i * kStat + 128 g, D 64 further.
  float* stat_s = reinterpret_cast<float*>(qdo_s + (S::kElems - 2 * S::kRowMajor));

  const int C = NH * HS;
  const int64_t ld = 3 * int64_t(C);
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int k0 = blockIdx.y * S::kKeys;
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
  const int group = warp / 4;
  // Query steps below k0 are entirely masked (query < key): step j covers
  // queries [k0 + 64 j, + 64).
  const int steps = CeilDiv(T - k0, kTile);

  auto q_core = [&](int step) { return qdo_s + (step % S::kStages) * 2 * S::kCore; };
  auto do_core = [&](int step) { return q_core(step) + S::kCore; };
  // The warpgroup's copy of the step's (lse, D).
  auto lse_stage = [&](int step) {
    return stat_s + (step % S::kStages) * S::kStat + group * 2 * kTile;
  };
  auto q_trans = [&](int step) {
    return tr_s + (step % (S::kTransposed > 0 ? S::kTransposed : 1)) * 2 * S::kCore;
  };
  auto do_trans = [&](int step) { return q_trans(step) + S::kCore; };

  // Starts loading query step `step` into its stage.
  auto load_step = [&](int step) {
    const int q = k0 + step * kTile;
    LoadCoreTileAsync<HS>(q_core(step), q_g, ld, q, kTile, T);
    LoadCoreTileAsync<HS>(do_core(step), do_g, C, q, kTile, T);
    CpAsyncCommit();
    // In each warpgroup, threads 0-63 load lse (in log2 units), 64-127 D:
    // one value each, without a branch (a divergent path here would make
    // the compiler serialize the wgmma that follow).
    const int r = threadIdx.x % kTile;
    const bool is_lse = threadIdx.x % 128 < kTile;
    const int row = min(q + r, T - 1);
    const float v = is_lse ? lse_g[row] * kLog2e : dsum_g[row];
    lse_stage(step)[threadIdx.x % 128] = q + r < T ? v : 0.0f;
  };

  LoadTileAsync<HS>(k_s, S::kLd, q_g + C, ld, k0, S::kKeys, T);
  LoadTileAsync<HS>(v_s, S::kLd, q_g + 2 * C, ld, k0, S::kKeys, T);
  load_step(0);

  uint32_t kf[HS / 16][4], vf[HS / 16][4];
  float dk[HS / 8][4], dv[HS / 8][4];
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.0f;
  }

  // Waits for step `step` (prefetching the next first; its stage was last
  // read before the barrier closing the iteration that read it) and, at
  // step 0, loads the K and V fragments.
  auto land = [&](int step) {
    PrefetchNextWaitCurrent(step + 1 < steps, [&] { load_step(step + 1); });
    // The step's cp.async tiles, for the tensor cores' reads (transposed
    // and unpipelined, the fence after the transposes covers them).
    if constexpr (kNMajor || kPipelined) FenceProxyAsync();
    __syncthreads();
    if (step == 0) {
#pragma unroll
      for (int kk = 0; kk < HS / 16; ++kk) {
        LoadFragA(kf[kk], k_s, S::kLd, warp * 16, kk * 16);
        LoadFragA(vf[kk], v_s, S::kLd, warp * 16, kk * 16);
      }
    }
  };
  // Q^T and dO^T of the step (transposed tilings), for the tensor cores.
  auto transpose = [&](int step) {
    TransposeToCoreLayout<kTile, HS, true>(q_trans(step), q_core(step), 0);
    TransposeToCoreLayout<kTile, HS, true>(do_trans(step), do_core(step), 0);
    FenceProxyAsync();
  };
  // The B operands of the step's accumulations: dO^T (for dV) and Q^T (dK).
  auto dv_operand = [&](int step) { return kNMajor ? do_core(step) : do_trans(step); };
  auto dk_operand = [&](int step) { return kNMajor ? q_core(step) : q_trans(step); };
  // P^T = exp2(S^T * scale * log2e - lse * log2e); dS^T = P^T * (dP^T - D).
  auto gradients = [&](float (&p)[kTile / 8][4], float (&ds)[kTile / 8][4], int step) {
    const float* l = lse_stage(step);
    KvStepGradients<kTile>(p, ds, key0, k0 + step * kTile, T, l, l + kTile, scale_log2);
  };

  if constexpr (!kPipelined) {
    for (int step = 0; step < steps; ++step) {
      land(step);
      if constexpr (!kNMajor) {
        transpose(step);
        __syncthreads();
      }
      // S^T (64 keys x 64 queries) = K Q^T and dP^T = V dO^T.
      float p[kTile / 8][4], ds[kTile / 8][4];
      WgmmaDualTileProduct<kTile, HS>(p, kf, q_core(step), ds, vf, do_core(step));
      gradients(p, ds, step);
      // dV += P^T dO and dK += dS^T Q (k dimension: the step's queries).
      WgmmaDualAccumulate<HS, kTile, kNMajor>(dv, p, dv_operand(step), dk, ds, dk_operand(step));
      __syncthreads();  // the next step refills a stage and rewrites Q^T, dO^T
    }
  } else {
    float p[kTile / 8][4], ds[kTile / 8][4];
    uint32_t pa[kTile / 16][4], dsa[kTile / 16][4];  // P^T, dS^T as A fragments
    auto issue_products = [&](int step) {  // S^T = K Q^T, dP^T = V dO^T
      WgmmaIssueProduct<kTile, HS>(p, kf, q_core(step));
      WgmmaIssueProduct<kTile, HS>(ds, vf, do_core(step));
      WgmmaCommit();
    };
    auto issue_accumulations = [&](int step) {  // dV += P^T dO, dK += dS^T Q
      WgmmaIssueAccumulate<HS, kTile, kNMajor>(dv, pa, dv_operand(step));
      WgmmaIssueAccumulate<HS, kTile, kNMajor>(dk, dsa, dk_operand(step));
      WgmmaCommit();
    };
    auto pack = [&] {
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        AccToFragA(pa[kk], p, kk);
        AccToFragA(dsa[kk], ds, kk);
      }
    };
    land(0);
    ZeroAccumulators(p);
    ZeroAccumulators(ds);
    WgmmaPin(p);
    WgmmaPin(ds);
    WgmmaFence();
    issue_products(0);
    if constexpr (!kNMajor) transpose(0);
    WgmmaWait<0>();
    WgmmaPin(p);
    WgmmaPin(ds);
    gradients(p, ds, 0);
    pack();
    __syncthreads();
    for (int step = 1; step < steps; ++step) {
      land(step);
      ZeroAccumulators(p);
      ZeroAccumulators(ds);
      WgmmaPin(p);  // p, ds zeroed and pa, dsa packed before the products
      WgmmaPin(ds);
      WgmmaPin(pa);
      WgmmaPin(dsa);
      WgmmaPin(dv);
      WgmmaPin(dk);
      WgmmaFence();
      issue_products(step);
      issue_accumulations(step - 1);
      // Step j's Q^T, dO^T while the tensor cores work; their readers pass
      // the barrier closing this iteration first.
      if constexpr (!kNMajor) transpose(step);
      WgmmaWait<1>();  // S^T, dP^T of this step done; step - 1's accumulations may run
      WgmmaPin(p);
      WgmmaPin(ds);
      gradients(p, ds, step);
      WgmmaWait<0>();
      WgmmaPin(dv);
      WgmmaPin(dk);
      pack();
      __syncthreads();  // the next step refills a stage and rewrites a transposed pair
    }
    WgmmaPin(pa);
    WgmmaPin(dsa);
    WgmmaPin(dv);
    WgmmaPin(dk);
    WgmmaFence();
    issue_accumulations(steps - 1);
    WgmmaWait<0>();
    WgmmaPin(dv);
    WgmmaPin(dk);
  }

  bf16* dk0 = dqkv + (int64_t(b) * T + key0) * ld + C + h * HS + 2 * t;
  StoreTileRows<HS>(dk0, 8 * ld, key0 < T, key0 + 8 < T, dk, scale, scale);
  StoreTileRows<HS>(dk0 + C, 8 * ld, key0 < T, key0 + 8 < T, dv, 1.0f, 1.0f);
#endif
}

template <int HS, int kGroups, bool kNMajor, bool kPipelined>
struct WgQSmem {
  static constexpr int kBr = 64 * kGroups;
  static constexpr int kLd = HS + 8;
  static constexpr int kRowMajor = kBr * kLd;  // Q or dO of the block, row-major
  static constexpr int kCore = kTile * HS;     // one K or V tile, core layout
  // (K, V) core tile stages: N-major and pipelined, tile kt - 1's K is read
  // in place while tile kt + 1 streams in, so three.
  static constexpr int kStages = kNMajor && kPipelined ? 3 : 2;
  // K^T tiles (core layout, HS x 64): pipelined, K^T_kt is written while
  // K^T_{kt-1} is read, so two.
  static constexpr int kTransposed = kNMajor ? 0 : (kPipelined ? 2 : 1);
  static constexpr int kElems = 2 * kRowMajor + 2 * kStages * kCore + kTransposed * kCore;
  static constexpr int kBytes = kElems * 2;
};

// grid (B * NH, ceil(T / kBr)); block y owns query tile (gridDim.y-1-y).
template <int HS, int kGroups, bool kNMajor, bool kPipelined>
__global__ void __launch_bounds__(kGroups * 128)
    FlashBackwardQWgmmaKernel(bf16* __restrict__ dqkv, const bf16* __restrict__ dout,
                              const bf16* __restrict__ qkv, const float* __restrict__ lse,
                              const float* __restrict__ dsum, int T, int NH, float scale,
                              float scale_log2) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();
#else
  using S = WgQSmem<HS, kGroups, kNMajor, kPipelined>;
  constexpr int kBr = S::kBr;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* q_s = reinterpret_cast<bf16*>(smem);
  bf16* do_s = q_s + S::kRowMajor;
  bf16* kv_s = do_s + S::kRowMajor;                // stage i: K core at 2i * kCore, V core next
  bf16* kt_s0 = kv_s + 2 * S::kStages * S::kCore;  // K^T tiles, core layout

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

  auto k_core = [&](int kt) { return kv_s + (kt % S::kStages) * 2 * S::kCore; };
  auto v_core = [&](int kt) { return k_core(kt) + S::kCore; };
  auto k_trans = [&](int kt) {
    return kt_s0 + (kt % (S::kTransposed > 0 ? S::kTransposed : 1)) * S::kCore;
  };
  // The B operand of dQ += dS K: K^T, or K itself read N-major.
  auto dq_operand = [&](int kt) { return kNMajor ? k_core(kt) : k_trans(kt); };
  auto load_kv = [&](int kt) {
    LoadCoreTileAsync<HS>(k_core(kt), q_g + C, ld, kt * kTile, kTile, T);
    LoadCoreTileAsync<HS>(v_core(kt), q_g + 2 * C, ld, kt * kTile, kTile, T);
    CpAsyncCommit();
  };
  LoadTileAsync<HS>(q_s, S::kLd, q_g, ld, q0, kBr, T);
  LoadTileAsync<HS>(do_s, S::kLd, dout + int64_t(b) * T * C + h * HS, C, q0, kBr, T);
  load_kv(0);
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

  // Waits for tile kt (prefetching kt + 1 first; its stage was last read
  // before the barrier closing the iteration that read it) and, at kt = 0,
  // loads the Q and dO fragments.
  auto land = [&](int kt) {
    PrefetchNextWaitCurrent(kt < kt_last, [&] { load_kv(kt + 1); });
    // The tile's cp.async writes, for the tensor cores' reads (transposed
    // and unpipelined, the fence after the transposes covers them).
    if constexpr (kNMajor || kPipelined) FenceProxyAsync();
    __syncthreads();
    if (kt == 0) {
#pragma unroll
      for (int kk = 0; kk < HS / 16; ++kk) {
        LoadFragA(qf[kk], q_s, S::kLd, group_row0 - q0 + (warp % 4) * 16, kk * 16);
        LoadFragA(dof[kk], do_s, S::kLd, group_row0 - q0 + (warp % 4) * 16, kk * 16);
      }
    }
  };
  auto transpose = [&](int kt) {  // K^T (transposed tilings), for the tensor cores
    TransposeToCoreLayout<kTile, HS, true>(k_trans(kt), k_core(kt), 0);
    FenceProxyAsync();
  };

  if constexpr (!kPipelined) {
    for (int kt = 0; kt <= kt_last; ++kt) {
      land(kt);
      if constexpr (!kNMajor) {
        transpose(kt);
        __syncthreads();
      }
      const int k0 = kt * kTile;
      if (k0 <= group_row0 + 63) {  // uniform across the warpgroup
        // S = Q K^T and dP = dO V^T (the warpgroup's 64 queries x 64 keys).
        float p[kTile / 8][4], ds[kTile / 8][4];
        WgmmaDualTileProduct<kTile, HS>(p, qf, k_core(kt), ds, dof, v_core(kt));
        QTileGradients<kTile>(p, ds, row0, k0, T, lse0, lse1, d0, d1, scale_log2);
        // dQ += dS K (k dimension: this tile's keys; B = K^T).
        WgmmaAccumulate<HS, kTile, kNMajor>(dq, ds, dq_operand(kt));
      }
      __syncthreads();  // the next iteration refills a stage and rewrites K^T
    }
  } else {
    float p[kTile / 8][4], ds[kTile / 8][4];
    uint32_t dsa[kTile / 16][4];  // dS as A fragments
    auto issue_products = [&](int kt) {  // S = Q K^T, dP = dO V^T
      ZeroAccumulators(p);
      ZeroAccumulators(ds);
      WgmmaPin(p);  // p, ds zeroed and dsa packed before the products
      WgmmaPin(ds);
      WgmmaPin(dsa);
      WgmmaPin(dq);
      WgmmaFence();
      WgmmaIssueProduct<kTile, HS>(p, qf, k_core(kt));
      WgmmaIssueProduct<kTile, HS>(ds, dof, v_core(kt));
      WgmmaCommit();
    };
    auto gradients = [&](int kt) {
      QTileGradients<kTile>(p, ds, row0, kt * kTile, T, lse0, lse1, d0, d1, scale_log2);
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) AccToFragA(dsa[kk], ds, kk);
    };
    land(0);
    issue_products(0);
    if constexpr (!kNMajor) transpose(0);
    WgmmaWait<0>();
    WgmmaPin(p);
    WgmmaPin(ds);
    gradients(0);
    __syncthreads();
    for (int kt = 1; kt <= kt_last; ++kt) {
      land(kt);
      // Tiles wholly above the warpgroup's rows are computed too (dS = 0):
      // a wgmma under a warpgroup-dependent branch gets serialized.
      issue_products(kt);
      WgmmaIssueAccumulate<HS, kTile, kNMajor>(dq, dsa, dq_operand(kt - 1));  // dQ += dS K
      WgmmaCommit();
      if constexpr (!kNMajor) transpose(kt);  // read next iteration, past the closing barrier
      WgmmaWait<1>();  // S, dP of tile kt done; tile kt - 1's dQ product may run
      WgmmaPin(p);
      WgmmaPin(ds);
      QTileGradients<kTile>(p, ds, row0, kt * kTile, T, lse0, lse1, d0, d1, scale_log2);
      WgmmaWait<0>();
      WgmmaPin(dq);
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) AccToFragA(dsa[kk], ds, kk);
      __syncthreads();  // the next iteration refills a stage and rewrites a K^T tile
    }
    WgmmaPin(dsa);
    WgmmaPin(dq);
    WgmmaFence();
    WgmmaIssueAccumulate<HS, kTile, kNMajor>(dq, dsa, dq_operand(kt_last));
    WgmmaCommit();
    WgmmaWait<0>();
    WgmmaPin(dq);
  }

  StoreTileRows<HS>(dqkv + (int64_t(b) * T + row0) * ld + h * HS + 2 * t, 8 * ld, row0 < T,
                    row0 + 8 < T, dq, scale, scale);
#endif
}

template <int HS, int kGroups, bool kNMajor, bool kPipelined>
absl::Status Launch(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                    const float* dsum, const AttentionDims& d, cudaStream_t stream) {
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  const float scale_log2 = scale * kLog2e;
  const int T = static_cast<int>(d.t), NH = static_cast<int>(d.nh);
  const auto bh = static_cast<unsigned>(d.b * d.nh);
  using KvS = WgKvSmem<HS, kGroups, kNMajor, kPipelined>;
  auto* kv_kernel = FlashBackwardKVWgmmaKernel<HS, kGroups, kNMajor, kPipelined>;
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, KvS::kBytes));
  const dim3 kv_grid(bh, static_cast<unsigned>(CeilDiv(d.t, KvS::kKeys)));
  kv_kernel<<<kv_grid, kGroups * 128, KvS::kBytes, stream>>>(dqkv, dout, qkv, lse, dsum, T, NH,
                                                             scale, scale_log2);
  WEFT_RETURN_IF_ERROR(CheckLaunch("FlashBackwardKVWgmmaKernel"));
  using QS = WgQSmem<HS, kGroups, kNMajor, kPipelined>;
  auto* q_kernel = FlashBackwardQWgmmaKernel<HS, kGroups, kNMajor, kPipelined>;
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(q_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, QS::kBytes));
  const dim3 q_grid(bh, static_cast<unsigned>(CeilDiv(d.t, QS::kBr)));
  q_kernel<<<q_grid, kGroups * 128, QS::kBytes, stream>>>(dqkv, dout, qkv, lse, dsum, T, NH,
                                                          scale, scale_log2);
  return CheckLaunch("FlashBackwardQWgmmaKernel");
}

template <int HS, int kGroups>
absl::Status LaunchVariant(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                           const float* dsum, const AttentionDims& d, bool n_major, bool pipelined,
                           cudaStream_t stream) {
  if (n_major) {
    return pipelined ? Launch<HS, kGroups, true, true>(dqkv, dout, qkv, lse, dsum, d, stream)
                     : Launch<HS, kGroups, true, false>(dqkv, dout, qkv, lse, dsum, d, stream);
  }
  return pipelined ? Launch<HS, kGroups, false, true>(dqkv, dout, qkv, lse, dsum, d, stream)
                   : Launch<HS, kGroups, false, false>(dqkv, dout, qkv, lse, dsum, d, stream);
}

template <int HS>
absl::Status LaunchGroups(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                          const float* dsum, const AttentionDims& d, int groups, bool n_major,
                          bool pipelined, cudaStream_t stream) {
  if (groups == 1) {
    return LaunchVariant<HS, 1>(dqkv, dout, qkv, lse, dsum, d, n_major, pipelined, stream);
  }
  if (groups == 2) {
    return LaunchVariant<HS, 2>(dqkv, dout, qkv, lse, dsum, d, n_major, pipelined, stream);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("flash attention wgmma backward: ", groups, " warpgroups; expected 1 or 2"));
}

}  // namespace

absl::Status LaunchFlashBackwardWgmma(void* dqkv, const void* dout, const void* qkv,
                                      const float* lse, const float* dsum,
                                      const AttentionDims& d, int warpgroups, bool n_major,
                                      bool pipelined, cudaStream_t stream) {
  if (d.b * d.t * d.nh == 0) return absl::OkStatus();
  bf16* dx = static_cast<bf16*>(dqkv);
  const bf16* dy = static_cast<const bf16*>(dout);
  const bf16* x = static_cast<const bf16*>(qkv);
  switch (d.hs) {
    case 32:
      return LaunchGroups<32>(dx, dy, x, lse, dsum, d, warpgroups, n_major, pipelined, stream);
    case 64:
      return LaunchGroups<64>(dx, dy, x, lse, dsum, d, warpgroups, n_major, pipelined, stream);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "flash attention wgmma backward: head size ", d.hs,
      "; expected 32 or 64 (128 runs on the mma.sync tilings 4x16 or 8x16)"));
}

}  // namespace weft::cuda
