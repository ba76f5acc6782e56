// Deterministic column sums over a row-major (M, N) matrix in two stages:
//   1. ColumnPartialsKernel: block (x, y) sums columns [32x, 32x+32) over the
//      rows of chunk y into partials[y, :] (f32), each column in a fixed order;
//   2. ColumnFinalizeKernel: one thread per column adds partials[0..R) in
//      order and accumulates into the destination (+=).
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

// Stage 2: dst[c] += sum_j partials[j * n + c] for `num_sums` stacked
// destinations (partials has num_sums * chunks rows, destination s's chunk j
// at row s * chunks + j).
template <typename G>
__global__ void ColumnFinalizeKernel(G* dst0, G* dst1, const float* partials, int chunks,
                                     int64_t n) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n) return;
  G* dst = blockIdx.y == 0 ? dst0 : dst1;
  const float* p = partials + int64_t(blockIdx.y) * chunks * n;
  float acc = 0.0f;
  for (int j = 0; j < chunks; ++j) acc += p[int64_t(j) * n + c];
  dst[c] = FromF<G>(ToF(dst[c]) + acc);
}

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_COLUMN_REDUCE_CUH_
