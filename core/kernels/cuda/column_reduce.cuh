// Deterministic column sums over a row-major (M, N) matrix in two stages:
//   1. ColumnPartialsKernel: block (x, y) sums columns [32x, 32x+32) over the
//      rows of chunk y into partials[y, :] (f32), each column in a fixed order;
//   2. ColumnFinalizeKernel: 8 threads per column add strided chunks of
//      partials[0..R), then one adds their 8 sums, in a fixed order, and
//      accumulates into the destination (+=).
// Layernorm backward (layernorm.cu) writes its partials in one pass and
// shares stage 2.
// The chunking depends only on M (ColumnChunks), never on the GPU, so a given
// shape always sums in the same order: bitwise-identical runs, no atomics.
#ifndef WEFT_CORE_KERNELS_CUDA_COLUMN_REDUCE_CUH_
#define WEFT_CORE_KERNELS_CUDA_COLUMN_REDUCE_CUH_

#include "core/kernels/cuda/common.cuh"

namespace weft::cuda {

constexpr int kColTile = 32;     // columns per block (one warp-wide row segment)
constexpr int kColRowLanes = 8;  // warps per block, each striding over rows
constexpr int kMaxColumnChunks = 256;

struct ColumnChunking {
  int chunks;          // R: row chunks (stage-1 grid.y)
  int rows_per_chunk;  // rows per chunk; the last may be shorter
};

inline ColumnChunking ColumnChunks(int64_t rows) {
  const int chunks = static_cast<int>(std::clamp<int64_t>(CeilDiv(rows, 64), 1, kMaxColumnChunks));
  return {chunks, static_cast<int>(CeilDiv(rows, chunks))};
}

// Stage 2: dst_s[c] += sum_j partials[(s * chunks + j) * n + c] for the
// destinations s = 0 (dst0) and, when dst1 is set, s = 1 (dst1). Block
// (kColTile, kColRowLanes): row ty adds chunks ty, ty + kColRowLanes, ... in
// order, then row 0 adds the kColRowLanes sums in order. The order depends on
// `chunks` only, and the chunks are read in parallel (hundreds of them when
// the partials come from a one-pass kernel with a row chunk per block).
template <typename G>
__global__ void ColumnFinalizeKernel(G* dst0, G* dst1, const float* __restrict__ partials,
                                     int chunks, int64_t n) {
  __shared__ float sums[kColRowLanes][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = int64_t(blockIdx.x) * kColTile + tx;
  const float* p = partials + int64_t(blockIdx.y) * chunks * n;
  float acc = 0.0f;
  if (c < n) {
    for (int j = ty; j < chunks; j += kColRowLanes) acc += p[int64_t(j) * n + c];
  }
  sums[ty][tx] = acc;
  __syncthreads();
  if (ty != 0 || c >= n) return;
  float total = 0.0f;
#pragma unroll
  for (int k = 0; k < kColRowLanes; ++k) total += sums[k][tx];
  G* dst = blockIdx.y == 0 ? dst0 : dst1;
  dst[c] = FromF<G>(ToF(dst[c]) + total);
}

template <typename G>
absl::Status LaunchColumnFinalize(G* dst0, G* dst1, const float* partials, int chunks, int64_t n,
                                  cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(CeilDiv(n, kColTile)), dst1 != nullptr ? 2 : 1);
  ColumnFinalizeKernel<G><<<grid, dim3(kColTile, kColRowLanes), 0, stream>>>(dst0, dst1, partials,
                                                                             chunks, n);
  return CheckLaunch("ColumnFinalizeKernel");
}

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_COLUMN_REDUCE_CUH_
