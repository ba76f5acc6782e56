#include "core/kernels/cuda/wgmma_probe.h"

#include "absl/strings/str_cat.h"
#include "core/kernels/cuda/attention_mma.cuh"
#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/wgmma.cuh"

namespace weft::cuda {
namespace {

template <int N, int K, WgmmaProbeB kHow>
__global__ void __launch_bounds__(128)
    WgmmaProbeKernel(float* __restrict__ d, const bf16* __restrict__ a,
                     const bf16* __restrict__ b) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();
#else
  constexpr int kLdA = K + 8, kLdB = N + 8;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* a_s = reinterpret_cast<bf16*>(smem);  // 64 x K row-major
  bf16* core = a_s + 64 * kLdA;               // B as N x K, core-matrix layout
  bf16* staging = core + N * K;  // B as K x N: row-major, or a K x N core tile
  LoadTileAsync<K>(a_s, kLdA, a, K, 0, 64, 64);
  if constexpr (kHow == WgmmaProbeB::kKMajor) {
    LoadCoreTileAsync<K>(core, b, K, 0, N, N);
  } else if constexpr (kHow == WgmmaProbeB::kTransposed) {
    LoadTileAsync<N>(staging, kLdB, b, N, 0, K, K);
  } else {  // kTransposedFromCore, kNMajor
    LoadCoreTileAsync<N>(staging, b, N, 0, K, K);
  }
  CpAsyncCommit();
  CpAsyncWait<0>();
  __syncthreads();
  if constexpr (kHow == WgmmaProbeB::kTransposed) {
    TransposeToCoreLayout<K, N>(core, staging, kLdB);
  } else if constexpr (kHow == WgmmaProbeB::kTransposedFromCore) {
    TransposeToCoreLayout<K, N, true>(core, staging, 0);
  }
  FenceProxyAsync();
  __syncthreads();

  const int warp = __shfl_sync(0xffffffffu, threadIdx.x / 32, 0), lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  uint32_t af[K / 16][4];
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) LoadFragA(af[kk], a_s, kLdA, warp * 16, kk * 16);
  float acc[N / 8][4];
  if constexpr (kHow == WgmmaProbeB::kNMajor) {
    // Pinned like the kernels' products: the zeroing stays above the
    // fence and the reads below the wait.
    ZeroAccumulators(acc);
    WgmmaPin(acc);
    WgmmaPin(af);
    WgmmaFence();
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
      WgmmaBf16<N, 1>(acc, af[kk], CoreLayoutDescriptorNMajor<N>(staging, kk));
    }
    WgmmaCommit();
    WgmmaWait<0>();
    WgmmaPin(acc);
  } else {
    WgmmaTileProduct<N, K>(acc, af, core);  // the attention kernels' helper
  }
  const int row = warp * 16 + g;
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
    const int col = j * 8 + 2 * t;
    d[row * N + col] = acc[j][0];
    d[row * N + col + 1] = acc[j][1];
    d[(row + 8) * N + col] = acc[j][2];
    d[(row + 8) * N + col + 1] = acc[j][3];
  }
#endif
}

template <int N, int K, WgmmaProbeB kHow>
absl::Status Launch(float* d, const bf16* a, const bf16* b, cudaStream_t stream) {
  constexpr int kBytes = (64 * (K + 8) + N * K + K * (N + 8)) * 2;
  WgmmaProbeKernel<N, K, kHow><<<1, 128, kBytes, stream>>>(d, a, b);
  return CheckLaunch("WgmmaProbeKernel");
}

template <int N, int K>
absl::Status LaunchShape(float* d, const bf16* a, const bf16* b, WgmmaProbeB how,
                         cudaStream_t stream) {
  switch (how) {
    case WgmmaProbeB::kKMajor: return Launch<N, K, WgmmaProbeB::kKMajor>(d, a, b, stream);
    case WgmmaProbeB::kTransposed: return Launch<N, K, WgmmaProbeB::kTransposed>(d, a, b, stream);
    case WgmmaProbeB::kTransposedFromCore:
      return Launch<N, K, WgmmaProbeB::kTransposedFromCore>(d, a, b, stream);
    case WgmmaProbeB::kNMajor: return Launch<N, K, WgmmaProbeB::kNMajor>(d, a, b, stream);
  }
  return absl::InvalidArgumentError("wgmma probe: unknown WgmmaProbeB");
}

}  // namespace

absl::Status LaunchWgmmaProbe(float* d, const void* a, const void* b, int n, int k,
                              WgmmaProbeB how, cudaStream_t stream) {
  const auto* a16 = static_cast<const bf16*>(a);
  const auto* b16 = static_cast<const bf16*>(b);
  if (k == 16 && n == 32) return LaunchShape<32, 16>(d, a16, b16, how, stream);
  if (k == 16 && n == 64) return LaunchShape<64, 16>(d, a16, b16, how, stream);
  if (k == 16 && n == 128) return LaunchShape<128, 16>(d, a16, b16, how, stream);
  if (k == 64 && n == 64) return LaunchShape<64, 64>(d, a16, b16, how, stream);
  return absl::InvalidArgumentError(
      absl::StrCat("wgmma probe: n=", n, " k=", k, "; expected k=16 with n 32/64/128, or 64x64"));
}

}  // namespace weft::cuda
