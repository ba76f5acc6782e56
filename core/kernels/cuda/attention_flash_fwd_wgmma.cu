// Flash-attention forward on Hopper's warpgroup tensor cores (sm_90a
// wgmma), bf16, head sizes 32/64/128: the same algorithm and results
// contract as attention_flash_fwd.cu, with the two products of each key
// tile issued as wgmma.mma_async over a warpgroup's 64 query rows.
//
// A block owns 64 * kGroups query rows of one (batch, head); warpgroup wg
// owns rows [64 wg, 64 wg + 64), warp w of it the 16 rows of its A
// fragments (wgmma.cuh). Per key tile of 64 (128 in the -k128 tilings):
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
// at once, or with kPipelined (tilings wgmma-*-pipe) the products run
// behind the softmax: iteration kt issues S_kt = Q K_kt^T and
// O += P_{kt-1} V_{kt-1} together, waits for S_kt alone, runs the softmax of
// tile kt while the tensor cores finish P_{kt-1} V_{kt-1} (and transposes
// V_kt meanwhile), then waits, rescales O and packs P_kt for the next
// iteration; one extra iteration issues the last P V. O sees the same
// operations in the same order (scale by alpha_kt, then add P_kt V_kt), so
// the results are the unpipelined kernel's bits. V then needs one more
// buffer (three stages N-major; two V^T tiles transposed), since V_{kt-1}
// is read while tile kt + 1 streams in.
//
// Masking as in the mma.sync kernel: the warpgroup's diagonal tile masks
// keys above the query (keys at or past T are above every live row);
// tiles wholly past a warpgroup's last row are skipped by that warpgroup,
// or, pipelined, multiplied masked to zero (P = 0, alpha = 1: for finite
// V, o, m and l keep their bits).
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

constexpr float kLog2e = 1.4426950408889634f;

// kKeys: keys per tile (64, or 128 in the -k128 tilings).
template <int HS, int kGroups, bool kNMajor, bool kPipelined, int kKeys>
struct WgmmaFwdSmem {
  static constexpr int kBc = kKeys;
  static constexpr int kBr = 64 * kGroups;
  static constexpr int kLd = HS + 8;      // row-major staging tiles: conflict-free ldmatrix
  static constexpr int kQ = kBr * kLd;    // Q staging (row-major)
  static constexpr int kK = kBc * HS;     // one K tile, core-matrix layout
  // One V tile: row-major staging, or with kNMajor a core tile like K.
  static constexpr int kV = kNMajor ? kBc * HS : kBc * kLd;
  // N-major V is read by the products in place: pipelined, V_{kt-1} is
  // still read while tile kt + 1 streams in, so three stages.
  static constexpr int kVStages = kNMajor && kPipelined ? 3 : 2;
  // V^T tiles (core-matrix layout): pipelined, V_kt is transposed while
  // V^T_{kt-1} is read, so two.
  static constexpr int kVtTiles = kNMajor ? 0 : (kPipelined ? 2 : 1);
  static constexpr int kVt = HS * kBc;
  // Q, two stages of K, the V stages, the V^T tiles (elements).
  static constexpr int kElems = kQ + 2 * kK + kVStages * kV + kVtTiles * kVt;
  static constexpr int kBytes = kElems * 2;
};

template <int HS, int kGroups, bool kNMajor, bool kPipelined, int kKeys>
__global__ void __launch_bounds__(kGroups * 128)
    FlashForwardWgmmaKernel(bf16* __restrict__ out, float* __restrict__ lse,
                            const bf16* __restrict__ qkv, int T, int NH, float scale_log2) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma exists on sm_90a only; the dispatch never launches this elsewhere
#else
  using S = WgmmaFwdSmem<HS, kGroups, kNMajor, kPipelined, kKeys>;
  constexpr int kBr = S::kBr, kBc = S::kBc;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* q_s = reinterpret_cast<bf16*>(smem);
  bf16* k_s0 = q_s + S::kQ;          // stage i at k_s0 + i * kK
  bf16* v_s0 = k_s0 + 2 * S::kK;     // stage i at v_s0 + i * kV
  bf16* vt_s0 = v_s0 + S::kVStages * S::kV;  // tile i at vt_s0 + i * kVt

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

  auto k_stage = [&](int kt) { return k_s0 + (kt & 1) * S::kK; };
  auto v_stage = [&](int kt) { return v_s0 + (kt % S::kVStages) * S::kV; };
  auto vt_tile = [&](int kt) { return vt_s0 + (kt % (S::kVtTiles > 0 ? S::kVtTiles : 1)) * S::kVt; };
  // The B operand of O += P_kt V_kt.
  auto pv_operand = [&](int kt) { return kNMajor ? v_stage(kt) : vt_tile(kt); };
  auto load_kv = [&](int kt) {
    LoadCoreTileAsync<HS>(k_stage(kt), k_g, ld, kt * kBc, kBc, T);
    if constexpr (kNMajor) {
      LoadCoreTileAsync<HS>(v_stage(kt), v_g, ld, kt * kBc, kBc, T);
    } else {
      LoadTileAsync<HS>(v_stage(kt), S::kLd, v_g, ld, kt * kBc, kBc, T);
    }
    CpAsyncCommit();
  };
  LoadTileAsync<HS>(q_s, S::kLd, q_g, ld, q0, kBr, T);
  load_kv(0);

  uint32_t qf[HS / 16][4];
  uint32_t pf[kBc / 16][4];  // P of the last tile as A fragments
  float o[HS / 8][4];
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

  // Waits for tile kt (prefetching kt + 1 first) and, at kt = 0, loads the
  // Q fragments. The stages tile kt + 1 refills were released by the
  // barrier that closed the iteration which last read them.
  auto land = [&](int kt) {
    PrefetchNextWaitCurrent(kt < kt_last, [&] { load_kv(kt + 1); });
    // The tile's cp.async writes, for the tensor cores' reads (transposed
    // and unpipelined, the fence after the transposes covers them).
    if constexpr (kNMajor || kPipelined) FenceProxyAsync();
    __syncthreads();  // tile kt (and Q) landed for every thread
    if (kt == 0) {
#pragma unroll
      for (int kk = 0; kk < HS / 16; ++kk) {
        LoadFragA(qf[kk], q_s, S::kLd, group_row0 - q0 + (warp % 4) * 16, kk * 16);
      }
    }
  };
  // The softmax of tile kt's scores s (landed), with o's rescale factors.
  auto softmax = [&](float (&s)[kBc / 8][4], int kt, float& alpha0, float& alpha1) {
    const int k0 = kt * kBc;
    ScaleAndMaskScores<kBc>(s, row0, k0, k0 + kBc - 1 > group_row0, scale_log2);
    // Tile 0 gives every row a live key, so m is finite from then on.
    OnlineSoftmaxScores<kBc>(s, m0, m1, l0, l1, alpha0, alpha1);
  };
  // V^T_kt (transposed tilings), made visible to the tensor cores.
  auto transpose_v = [&](int kt) {
    TransposeToCoreLayout<kBc, HS>(vt_tile(kt), v_stage(kt), S::kLd);
    FenceProxyAsync();
  };

  if constexpr (!kPipelined) {
    for (int kt = 0; kt <= kt_last; ++kt) {
      land(kt);
      if constexpr (!kNMajor) {
        transpose_v(kt);  // for this iteration's second product
        __syncthreads();
      }
      if (kt * kBc <= group_row0 + 63) {  // uniform across the warpgroup
        float s[kBc / 8][4], alpha0, alpha1;
        WgmmaTileProduct<kBc, HS>(s, qf, k_stage(kt));  // S = Q K^T
        softmax(s, kt, alpha0, alpha1);
        ScaleRows<HS>(o, alpha0, alpha1);
        WgmmaAccumulate<HS, kBc, kNMajor>(o, s, pv_operand(kt));  // O += P V
      }
      __syncthreads();  // the next iteration refills stages and V^T this one read
    }
  } else {
    // Every wgmma below is issued by the whole warpgroup on every path (a
    // wgmma under a condition the compiler cannot prove uniform across the
    // warpgroup gets serialized): tiles wholly above a warpgroup's rows are
    // computed too, masked entirely (P = 0, alpha = 1: o, m and l keep
    // their values exactly). Tile 0 first, on its own.
    float s[kBc / 8][4], alpha0, alpha1;
    land(0);
    ZeroAccumulators(s);
    WgmmaPin(s);
    WgmmaFence();
    WgmmaIssueProduct<kBc, HS>(s, qf, k_stage(0));
    WgmmaCommit();
    if constexpr (!kNMajor) transpose_v(0);
    WgmmaWait<0>();
    WgmmaPin(s);
    softmax(s, 0, alpha0, alpha1);
    ScaleRows<HS>(o, alpha0, alpha1);
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) AccToFragA(pf[kk], s, kk);
    __syncthreads();
    for (int kt = 1; kt <= kt_last; ++kt) {
      land(kt);
      ZeroAccumulators(s);
      WgmmaPin(s);  // s zeroed, pf packed and o rescaled before the products
      WgmmaPin(pf);
      WgmmaPin(o);
      WgmmaFence();
      WgmmaIssueProduct<kBc, HS>(s, qf, k_stage(kt));  // S = Q K_kt^T
      WgmmaCommit();
      WgmmaIssueAccumulate<HS, kBc, kNMajor>(o, pf, pv_operand(kt - 1));  // O += P V, tile kt - 1
      WgmmaCommit();
      // V^T_kt for the next iteration while the tensor cores work; its
      // readers pass the barrier closing this iteration first.
      if constexpr (!kNMajor) transpose_v(kt);
      WgmmaWait<1>();  // S_kt done; P_{kt-1} V_{kt-1} may still run
      WgmmaPin(s);
      softmax(s, kt, alpha0, alpha1);
      WgmmaWait<0>();
      WgmmaPin(o);
      ScaleRows<HS>(o, alpha0, alpha1);
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) AccToFragA(pf[kk], s, kk);
      __syncthreads();  // the next iteration refills stages and V^T this one read
    }
    WgmmaPin(pf);
    WgmmaPin(o);
    WgmmaFence();
    WgmmaIssueAccumulate<HS, kBc, kNMajor>(o, pf, pv_operand(kt_last));  // the last P V
    WgmmaCommit();
    WgmmaWait<0>();
    WgmmaPin(o);
  }

  l0 = GroupSum(l0);
  l1 = GroupSum(l1);
  StoreTileRows<HS>(out + (int64_t(b) * T + row0) * C + h * HS + 2 * t, 8 * int64_t(C), row0 < T,
                    row0 + 8 < T, o, 1.0f / l0, 1.0f / l1);
  StoreRowLse(lse + int64_t(bh) * T, row0, T, m0, m1, l0, l1);
#endif
}

template <int HS, int kGroups, bool kNMajor, bool kPipelined, int kKeys = kFlashTile>
absl::Status Launch(bf16* out, float* lse, const bf16* qkv, const AttentionDims& d,
                    cudaStream_t stream) {
  using S = WgmmaFwdSmem<HS, kGroups, kNMajor, kPipelined, kKeys>;
  auto* kernel = FlashForwardWgmmaKernel<HS, kGroups, kNMajor, kPipelined, kKeys>;
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kBytes));
  const dim3 grid(static_cast<unsigned>(d.b * d.nh), static_cast<unsigned>(CeilDiv(d.t, S::kBr)));
  const float scale_log2 = kLog2e / sqrtf(static_cast<float>(HS));
  kernel<<<grid, kGroups * 128, S::kBytes, stream>>>(out, lse, qkv, static_cast<int>(d.t),
                                                     static_cast<int>(d.nh), scale_log2);
  return CheckLaunch("FlashForwardWgmmaKernel");
}

template <int HS, int kGroups>
absl::Status LaunchVariant(bf16* out, float* lse, const bf16* qkv, const AttentionDims& d,
                           bool n_major, bool pipelined, int key_tile, cudaStream_t stream) {
  if (key_tile == 128) {
    if (!pipelined) {
      return absl::InvalidArgumentError(
          "flash attention wgmma forward: 128-key tiles come pipelined only (-pipe-k128)");
    }
    if constexpr (HS <= 64) {
      return n_major ? Launch<HS, kGroups, true, true, 128>(out, lse, qkv, d, stream)
                     : Launch<HS, kGroups, false, true, 128>(out, lse, qkv, d, stream);
    } else {
      // The scores, P and O accumulators would exceed a thread's registers.
      return absl::InvalidArgumentError(absl::StrCat(
          "flash attention wgmma forward: 128-key tiles need head size 32 or 64, not ", HS,
          "; use a 64-key tiling (wgmma-*-pipe)"));
    }
  }
  if (key_tile != kFlashTile) {
    return absl::InvalidArgumentError(absl::StrCat("flash attention wgmma forward: key tiles of ",
                                                   key_tile, "; expected 64 or 128"));
  }
  if (n_major) {
    return pipelined ? Launch<HS, kGroups, true, true>(out, lse, qkv, d, stream)
                     : Launch<HS, kGroups, true, false>(out, lse, qkv, d, stream);
  }
  return pipelined ? Launch<HS, kGroups, false, true>(out, lse, qkv, d, stream)
                   : Launch<HS, kGroups, false, false>(out, lse, qkv, d, stream);
}

template <int HS>
absl::Status LaunchGroups(bf16* out, float* lse, const bf16* qkv, const AttentionDims& d,
                          int groups, bool n_major, bool pipelined, int key_tile,
                          cudaStream_t stream) {
  if (groups == 1) {
    return LaunchVariant<HS, 1>(out, lse, qkv, d, n_major, pipelined, key_tile, stream);
  }
  if (groups == 2) {
    return LaunchVariant<HS, 2>(out, lse, qkv, d, n_major, pipelined, key_tile, stream);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("flash attention wgmma forward: ", groups, " warpgroups; expected 1 or 2"));
}

}  // namespace

absl::Status LaunchFlashForwardWgmma(void* out, float* lse, const void* qkv,
                                     const AttentionDims& d, int warpgroups, bool n_major,
                                     bool pipelined, int key_tile, cudaStream_t stream) {
  if (d.b * d.t * d.nh == 0) return absl::OkStatus();
  bf16* o = static_cast<bf16*>(out);
  const bf16* x = static_cast<const bf16*>(qkv);
  switch (d.hs) {
    case 32:
      return LaunchGroups<32>(o, lse, x, d, warpgroups, n_major, pipelined, key_tile, stream);
    case 64:
      return LaunchGroups<64>(o, lse, x, d, warpgroups, n_major, pipelined, key_tile, stream);
    case 128:
      return LaunchGroups<128>(o, lse, x, d, warpgroups, n_major, pipelined, key_tile, stream);
  }
  return absl::InvalidArgumentError("flash attention needs head size 32, 64 or 128");
}

}  // namespace weft::cuda
