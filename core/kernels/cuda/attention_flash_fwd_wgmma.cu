// Flash-attention forward on Hopper's warpgroup tensor cores (sm_90a
// wgmma), bf16, head sizes 32/64/128: the same algorithm and results
// contract as attention_flash_fwd.cu, with the two products of each key
// tile issued as wgmma.mma_async over a warpgroup's 64 query rows.
//
// A block owns 64 * kGroups query rows of one (batch, head); warpgroup wg
// owns rows [64 wg, 64 wg + 64), warp w of it the 16 rows of its A
// fragments (wgmma.cuh). Per key tile of 64:
//   S = Q K^T   A = Q fragments held in registers (loaded once), B = the K
//               tile, copied by cp.async straight into the core-matrix
//               layout (K rows are already "K-major": head dims contiguous);
//   P = online softmax of S in registers (the accumulators have the
//               mma.sync layout, so the shared tile steps apply unchanged);
//   O += P V    A = P repacked from S, B = V^T: V arrives row-major (keys x
//               head dims) in a staging tile and is transposed into the
//               core-matrix layout with ldmatrix.trans before the product;
//               or, with kNMajor (tilings wgmma-*-nmajor), V is copied into
//               the core layout like K and read N-major through the
//               instruction's transpose bit: no transpose, one barrier less.
// K and the V staging tile are double-buffered (cp.async fetches tile kt + 1
// while tile kt is used). Each product is issued, committed and waited for
// at once; overlapping the softmax with the next tile's products (ping-pong
// between warpgroups, FlashAttention-3) is the next step.
//
// Masking as in the mma.sync kernel: the warpgroup's diagonal tile masks
// keys above the query (keys at or past T are above every live row);
// tiles wholly past a warpgroup's last row are skipped by that warpgroup.
//
// Built for sm_90a only; other targets compile a trap, and the dispatch
// (attention_simple.cu) offers the wgmma tilings only on compute
// capability 9.0.
#include "absl/strings/str_cat.h"
#include "core/kernels/cuda/attention_flash_tiles.cuh"
#include "core/kernels/cuda/attention_internal.h"
#include "core/kernels/cuda/attention_mma.cuh"
#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/wgmma.cuh"

namespace weft::cuda {
namespace {

constexpr int kBc = kFlashTile;  // keys per tile
constexpr float kLog2e = 1.4426950408889634f;

template <int HS, int kGroups, bool kNMajor>
struct WgmmaFwdSmem {
  static constexpr int kBr = 64 * kGroups;
  static constexpr int kLd = HS + 8;      // row-major staging tiles: conflict-free ldmatrix
  static constexpr int kQ = kBr * kLd;    // Q staging (row-major)
  static constexpr int kK = kBc * HS;     // one K tile, core-matrix layout
  // One V tile: row-major staging, or with kNMajor a core tile like K.
  static constexpr int kV = kNMajor ? kBc * HS : kBc * kLd;
  static constexpr int kVt = kNMajor ? 0 : HS * kBc;  // V^T, core-matrix layout
  // Q, two stages of K, two stages of V, V^T (elements).
  static constexpr int kElems = kQ + 2 * kK + 2 * kV + kVt;
  static constexpr int kBytes = kElems * 2;
};

template <int HS, int kGroups, bool kNMajor>
__global__ void __launch_bounds__(kGroups * 128)
    FlashForwardWgmmaKernel(bf16* __restrict__ out, float* __restrict__ lse,
                            const bf16* __restrict__ qkv, int T, int NH, float scale_log2) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma exists on sm_90a only; the dispatch never launches this elsewhere
#else
  using S = WgmmaFwdSmem<HS, kGroups, kNMajor>;
  constexpr int kBr = S::kBr;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* q_s = reinterpret_cast<bf16*>(smem);
  bf16* k_s0 = q_s + S::kQ;    // stage i at k_s0 + i * kK
  bf16* v_s0 = k_s0 + 2 * S::kK;  // stage i at v_s0 + i * kV
  bf16* vt_s = v_s0 + 2 * S::kV;

  const int C = NH * HS;
  const int64_t ld = 3 * int64_t(C);
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int qt = gridDim.y - 1 - blockIdx.y;  // heaviest query tiles first
  const int q0 = qt * kBr;
  const bf16* q_g = qkv + int64_t(b) * T * ld + h * HS;
  const bf16* k_g = q_g + C;
  const bf16* v_g = q_g + 2 * C;

  // The warp index broadcast from lane 0: the compiler then knows it (and
  // the warpgroup's branch below) is uniform across the warp, and does not
  // serialize the wgmma inside.
  const int warp = __shfl_sync(0xffffffffu, threadIdx.x / kWarpSize, 0);
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane >> 2, t = lane & 3;
  const int group = warp / 4;
  const int group_row0 = q0 + group * 64;  // the warpgroup's rows: [group_row0, +64)
  const int row0 = group_row0 + (warp % 4) * 16 + g;  // this thread's rows: row0, row0 + 8
  const int kt_last = (min(q0 + kBr, T) - 1) / kBc;  // key tiles up to the last live query

  auto load_kv = [&](int k, int st) {
    LoadCoreTileAsync<HS>(k_s0 + st * S::kK, k_g, ld, k, kBc, T);
    if constexpr (kNMajor) {
      LoadCoreTileAsync<HS>(v_s0 + st * S::kV, v_g, ld, k, kBc, T);
    } else {
      LoadTileAsync<HS>(v_s0 + st * S::kV, S::kLd, v_g, ld, k, kBc, T);
    }
    CpAsyncCommit();
  };
  LoadTileAsync<HS>(q_s, S::kLd, q_g, ld, q0, kBr, T);
  load_kv(0, 0);

  uint32_t qf[HS / 16][4];
  float o[HS / 8][4];
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

  for (int kt = 0; kt <= kt_last; ++kt) {
    const int k0 = kt * kBc;
    const int st = kt & 1;
    if (kt < kt_last) {
      // The other stage was last read in iteration kt - 1, which ended with a barrier.
      load_kv(k0 + kBc, st ^ 1);
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    if constexpr (kNMajor) FenceProxyAsync();  // the tile's cp.async, for wgmma
    __syncthreads();  // tile kt (and Q) landed for every thread
    if (kt == 0) {
#pragma unroll
      for (int kk = 0; kk < HS / 16; ++kk) {
        LoadFragA(qf[kk], q_s, S::kLd, group_row0 - q0 + (warp % 4) * 16, kk * 16);
      }
    }
    if constexpr (!kNMajor) {
      // V^T for the second product; the previous iteration's readers of
      // vt_s passed its closing barrier.
      TransposeToCoreLayout<kBc, HS>(vt_s, v_s0 + st * S::kV, S::kLd);
      FenceProxyAsync();  // the K tile's cp.async and the V^T stores, for wgmma
      __syncthreads();
    }

    if (k0 <= group_row0 + 63) {  // uniform across the warpgroup
      float s[kBc / 8][4];
      WgmmaTileProduct<kBc, HS>(s, qf, k_s0 + st * S::kK);  // S = Q K^T

      ScaleAndMaskScores<kBc>(s, row0, k0, k0 + kBc - 1 > group_row0, scale_log2);
      // Tile 0 gives every row a live key, so m is finite from then on.
      OnlineSoftmaxStep<HS, kBc>(s, m0, m1, l0, l1, o);

      // O += P V
      WgmmaAccumulate<HS, kBc, kNMajor>(o, s, kNMajor ? v_s0 + st * S::kV : vt_s);
    }
    __syncthreads();  // the next iteration refills stage st with tile kt + 2 and rewrites vt_s
  }

  l0 = GroupSum(l0);
  l1 = GroupSum(l1);
  StoreTileRows<HS>(out + (int64_t(b) * T + row0) * C + h * HS + 2 * t, 8 * int64_t(C), row0 < T,
                    row0 + 8 < T, o, 1.0f / l0, 1.0f / l1);
  StoreRowLse(lse + int64_t(bh) * T, row0, T, m0, m1, l0, l1);
#endif
}

template <int HS, int kGroups, bool kNMajor>
absl::Status Launch(bf16* out, float* lse, const bf16* qkv, const AttentionDims& d,
                    cudaStream_t stream) {
  using S = WgmmaFwdSmem<HS, kGroups, kNMajor>;
  auto* kernel = FlashForwardWgmmaKernel<HS, kGroups, kNMajor>;
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kBytes));
  const dim3 grid(static_cast<unsigned>(d.b * d.nh), static_cast<unsigned>(CeilDiv(d.t, S::kBr)));
  const float scale_log2 = kLog2e / sqrtf(static_cast<float>(HS));
  kernel<<<grid, kGroups * 128, S::kBytes, stream>>>(out, lse, qkv, static_cast<int>(d.t),
                                                     static_cast<int>(d.nh), scale_log2);
  return CheckLaunch("FlashForwardWgmmaKernel");
}

template <int HS>
absl::Status LaunchGroups(bf16* out, float* lse, const bf16* qkv, const AttentionDims& d,
                          int groups, bool n_major, cudaStream_t stream) {
  if (groups == 1 && !n_major) return Launch<HS, 1, false>(out, lse, qkv, d, stream);
  if (groups == 2 && !n_major) return Launch<HS, 2, false>(out, lse, qkv, d, stream);
  if (groups == 1 && n_major) return Launch<HS, 1, true>(out, lse, qkv, d, stream);
  if (groups == 2 && n_major) return Launch<HS, 2, true>(out, lse, qkv, d, stream);
  return absl::InvalidArgumentError(
      absl::StrCat("flash attention wgmma forward: ", groups, " warpgroups; expected 1 or 2"));
}

}  // namespace

absl::Status LaunchFlashForwardWgmma(void* out, float* lse, const void* qkv,
                                     const AttentionDims& d, int warpgroups, bool n_major,
                                     cudaStream_t stream) {
  if (d.b * d.t * d.nh == 0) return absl::OkStatus();
  bf16* o = static_cast<bf16*>(out);
  const bf16* x = static_cast<const bf16*>(qkv);
  switch (d.hs) {
    case 32: return LaunchGroups<32>(o, lse, x, d, warpgroups, n_major, stream);
    case 64: return LaunchGroups<64>(o, lse, x, d, warpgroups, n_major, stream);
    case 128: return LaunchGroups<128>(o, lse, x, d, warpgroups, n_major, stream);
  }
  return absl::InvalidArgumentError("flash attention needs head size 32, 64 or 128");
}

}  // namespace weft::cuda
