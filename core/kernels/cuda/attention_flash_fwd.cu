// Flash-attention forward (FlashAttention-2 style) for bf16 on tensor cores.
//
// Block = 4 warps, owns 64 query rows of one (batch, head); warp w owns rows
// [16w, 16w+16). It walks the key/value tiles of 64 keys up to the diagonal
// (causal), computing S = Q K^T with mma.sync, an online softmax in registers
// (running max m and sum l per row, in the log2 domain so exp is one exp2),
// and O += P V with P repacked straight from the S accumulators. Nothing of
// size T x T touches memory; logsumexp per row is saved for backward.
// K/V tiles are double-buffered: cp.async fetches tile kt + 1 while tile kt
// is multiplied, and fragments come from shared memory through ldmatrix (V
// through its .trans form, so V is never stored transposed).
//
// Masking: on the diagonal tile (k0 == q0) keys above the query are -inf.
// Keys at or past T only occur in the last tile, where they are also above
// every valid query, so the causal mask covers them. Query rows past T are
// computed on zeros and never stored.
#include "core/kernels/cuda/attention_internal.h"
#include "core/kernels/cuda/attention_flash_tiles.cuh"
#include "core/kernels/cuda/attention_mma.cuh"
#include "core/kernels/cuda/common.cuh"

namespace weft::cuda {
namespace {

constexpr int kBr = 64;  // query rows per block
constexpr int kBc = 64;  // keys per tile; equal to kBr so tile kt <= qt is the causal range
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int HS>
struct FwdSmem {
  static constexpr int kLd = HS + 8;  // +8 bf16 (16 B) per row: conflict-free ldmatrix
  static constexpr int kQ = kBr * kLd;
  static constexpr int kKv = kBc * kLd;  // one K or V tile, row-major
  // Q, then two stages of (K, V): the next tile loads while this one is used.
  static constexpr int kBytes = (kQ + 4 * kKv) * 2;
};

// grid (B * NH, ceil(T / 64)); the heaviest query tiles (largest qt) launch first.
template <int HS>
__global__ void __launch_bounds__(kThreads)
    FlashForwardKernel(bf16* __restrict__ out, float* __restrict__ lse,
                       const bf16* __restrict__ qkv, int T, int NH, float scale_log2) {
  using S = FwdSmem<HS>;
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
  const int row0 = q0 + warp * 16 + g;  // this thread's rows: row0 and row0 + 8

  LoadTileAsync<HS>(q_s, S::kLd, q_g, ld, q0, kBr, T);
  LoadTileAsync<HS>(kv_s, S::kLd, k_g, ld, 0, kBc, T);
  LoadTileAsync<HS>(kv_s + S::kKv, S::kLd, v_g, ld, 0, kBc, T);
  CpAsyncCommit();
  uint32_t qf[HS / 16][4];

  float o[HS / 8][4];
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY;  // running max (log2 units) of rows row0, row0+8
  float l0 = 0.0f, l1 = 0.0f;            // this thread's share of the running sums

  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * kBc;
    // Prefetch the next tile into the other stage (last read in iteration
    // kt - 1, which ended with a barrier), then wait for this one.
    if (kt < qt) {
      bf16* next = kv_s + ((kt + 1) & 1) * 2 * S::kKv;
      LoadTileAsync<HS>(next, S::kLd, k_g, ld, k0 + kBc, kBc, T);
      LoadTileAsync<HS>(next + S::kKv, S::kLd, v_g, ld, k0 + kBc, kBc, T);
      CpAsyncCommit();
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();
    if (kt == 0) {
#pragma unroll
      for (int kk = 0; kk < HS / 16; ++kk) LoadFragA(qf[kk], q_s, S::kLd, warp * 16, kk * 16);
    }
    const bf16* k_s = kv_s + (kt & 1) * 2 * S::kKv;
    const bf16* v_s = k_s + S::kKv;

    float s[kBc / 8][4];
    ScoreTile<HS, kBc>(s, qf, k_s, S::kLd);
    const bool diagonal = kt == qt;
#pragma unroll
    for (int j = 0; j < kBc / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + j * 8 + 2 * t + (e & 1);
        const int row = row0 + (e >= 2 ? 8 : 0);
        float v = s[j][e] * scale_log2;
        if (diagonal && key > row) v = -INFINITY;
        s[j][e] = v;
      }
    }
    // Key k0 <= row for every row of this tile, so each row has a live
    // score and m never stays -inf.
    OnlineSoftmaxStep<HS, kBc>(s, m0, m1, l0, l1, o);
    AccumulateProduct<HS, kBc>(o, s, v_s, S::kLd);  // O += P V
    __syncthreads();  // the next iteration refills this stage with tile kt + 2
  }

  l0 = GroupSum(l0);
  l1 = GroupSum(l1);
  const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
  bf16* out0 = out + (int64_t(b) * T + row0) * C + h * HS + 2 * t;
  bf16* out1 = out0 + 8 * int64_t(C);
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) {
    if (row0 < T) {
      *reinterpret_cast<uint32_t*>(out0 + n * 8) = PackBf16(o[n][0] * inv0, o[n][1] * inv0);
    }
    if (row0 + 8 < T) {
      *reinterpret_cast<uint32_t*>(out1 + n * 8) = PackBf16(o[n][2] * inv1, o[n][3] * inv1);
    }
  }
  if (t == 0) {
    float* lse_row = lse + int64_t(bh) * T;
    if (row0 < T) lse_row[row0] = (m0 + log2f(l0)) * kLn2;
    if (row0 + 8 < T) lse_row[row0 + 8] = (m1 + log2f(l1)) * kLn2;
  }
}

template <int HS>
absl::Status Launch(bf16* out, float* lse, const bf16* qkv, const AttentionDims& d,
                    cudaStream_t stream) {
  constexpr int kBytes = FwdSmem<HS>::kBytes;
  // Above 48 KiB (HS = 128) dynamic shared memory must be opted into; the
  // call is cheap, so it is made every launch rather than cached per device.
  WEFT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
      FlashForwardKernel<HS>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
  const dim3 grid(static_cast<unsigned>(d.b * d.nh), static_cast<unsigned>(CeilDiv(d.t, kBr)));
  const float scale_log2 = kLog2e / sqrtf(static_cast<float>(HS));
  FlashForwardKernel<HS><<<grid, kThreads, kBytes, stream>>>(
      out, lse, qkv, static_cast<int>(d.t), static_cast<int>(d.nh), scale_log2);
  return CheckLaunch("FlashForwardKernel");
}

}  // namespace

absl::Status LaunchFlashForward(void* out, float* lse, const void* qkv, const AttentionDims& d,
                                cudaStream_t stream) {
  if (d.b * d.t * d.nh == 0) return absl::OkStatus();
  bf16* o = static_cast<bf16*>(out);
  const bf16* x = static_cast<const bf16*>(qkv);
  switch (d.hs) {
    case 32: return Launch<32>(o, lse, x, d, stream);
    case 64: return Launch<64>(o, lse, x, d, stream);
    case 128: return Launch<128>(o, lse, x, d, stream);
  }
  return absl::InvalidArgumentError("flash attention needs head size 32, 64 or 128");
}

}  // namespace weft::cuda
