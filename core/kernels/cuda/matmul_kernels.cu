// Column sums (bias gradients) and unfused matmul epilogues. These are the
// slow-but-sure path: fused cuBLASLt epilogues do the common cases, and the
// column sum is ours because cuBLASLt's BGRAD epilogues overwrite, while
// gradients here accumulate (+=) across micro-batches.
#include "core/kernels/cuda/column_reduce.cuh"
#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/gelu.cuh"
#include "core/kernels/cuda/matmul_kernels.h"

namespace weft::cuda {
namespace {

constexpr int kThreads = 256;

// Stage 1 of the column sum; see column_reduce.cuh. blockDim (32, 8).
template <typename T>
__global__ void ColumnPartialsKernel(const T* __restrict__ src, float* __restrict__ partials,
                                     int64_t rows, int64_t cols, int rows_per_chunk) {
  __shared__ float s[kColRowLanes][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = int64_t(blockIdx.x) * kColTile + tx;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  float acc = 0.0f;
  if (c < cols) {
    for (int64_t r = r0 + ty; r < r1; r += kColRowLanes) acc += ToF(src[r * cols + c]);
  }
  s[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && c < cols) {
    float total = 0.0f;
#pragma unroll
    for (int k = 0; k < kColRowLanes; ++k) total += s[k][tx];
    partials[int64_t(blockIdx.y) * cols + c] = total;
  }
}

// The same sums with each thread owning V adjacent columns read by one
// 16-byte load per row: a warp covers 32 * V columns of a row at once instead
// of 32. Rows are assigned and added in the same order as above, so every
// column's sum is bitwise the same.
template <typename T>
__global__ void ColumnPartialsVecKernel(const T* __restrict__ src, float* __restrict__ partials,
                                        int64_t rows, int64_t cols, int rows_per_chunk) {
  constexpr int V = Packed128<T>::kSize;
  __shared__ float s[kColRowLanes][kColTile * V];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = (int64_t(blockIdx.x) * kColTile + tx) * V;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  float acc[V] = {};
  if (c < cols) {
    for (int64_t r = r0 + ty; r < r1; r += kColRowLanes) {
      float f[V];
      LoadF<V>(src + r * cols + c, f);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] += f[k];
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) s[ty][tx * V + k] = acc[k];
  __syncthreads();
  // All 256 threads finalize: thread i sums column i of the block over ty.
  const int i = ty * kColTile + tx;
  for (int col = i; col < kColTile * V; col += kColTile * kColRowLanes) {
    const int64_t gc = int64_t(blockIdx.x) * kColTile * V + col;
    if (gc >= cols) continue;
    float total = 0.0f;
#pragma unroll
    for (int k = 0; k < kColRowLanes; ++k) total += s[k][col];
    partials[int64_t(blockIdx.y) * cols + gc] = total;
  }
}

template <typename T, typename B>
__global__ void AddBiasKernel(T* out, const B* __restrict__ bias, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = FromF<T>(ToF(out[i]) + ToF(bias[i % cols]));
  }
}

template <typename T, typename B>
__global__ void BiasGeluKernel(T* __restrict__ out, T* __restrict__ aux,
                               const B* __restrict__ bias, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    // Round the pre-activation first: backward reads it back from aux.
    const T pre = FromF<T>(ToF(aux[i]) + ToF(bias[i % cols]));
    aux[i] = pre;
    out[i] = FromF<T>(Gelu(ToF(pre)));
  }
}

template <typename T>
absl::Status ColumnPartials(const void* src, float* scratch, int64_t rows, int64_t cols,
                            const ColumnChunking& ch, cudaStream_t stream) {
  const dim3 block(kColTile, kColRowLanes);
  constexpr int V = Packed128<T>::kSize;
  if (cols % V == 0 && Aligned16(src)) {
    const dim3 grid(static_cast<unsigned>(CeilDiv(cols, kColTile * V)), ch.chunks);
    ColumnPartialsVecKernel<T><<<grid, block, 0, stream>>>(static_cast<const T*>(src), scratch,
                                                           rows, cols, ch.rows_per_chunk);
    return CheckLaunch("ColumnPartialsVecKernel");
  }
  const dim3 grid(static_cast<unsigned>(CeilDiv(cols, kColTile)), ch.chunks);
  ColumnPartialsKernel<T><<<grid, block, 0, stream>>>(static_cast<const T*>(src), scratch, rows,
                                                      cols, ch.rows_per_chunk);
  return CheckLaunch("ColumnPartialsKernel");
}

template <typename G>
absl::Status ColumnFinalize(void* dst, const float* scratch, int64_t cols,
                            const ColumnChunking& ch, cudaStream_t stream) {
  return LaunchColumnFinalize<G>(static_cast<G*>(dst), nullptr, scratch, ch.chunks, cols, stream);
}

template <typename T>
absl::Status AddBiasT(T* out, const void* bias, DType bias_dtype, int64_t rows, int64_t cols,
                      cudaStream_t stream) {
  const unsigned grid = GridFor(rows * cols, kThreads);
  if (bias_dtype == DType::kF32) {
    AddBiasKernel<<<grid, kThreads, 0, stream>>>(out, static_cast<const float*>(bias), rows, cols);
  } else {
    AddBiasKernel<<<grid, kThreads, 0, stream>>>(out, static_cast<const bf16*>(bias), rows, cols);
  }
  return CheckLaunch("AddBiasKernel");
}

template <typename T>
absl::Status BiasGeluT(T* out, T* aux, const void* bias, DType bias_dtype, int64_t rows,
                       int64_t cols, cudaStream_t stream) {
  const unsigned grid = GridFor(rows * cols, kThreads);
  if (bias_dtype == DType::kF32) {
    BiasGeluKernel<<<grid, kThreads, 0, stream>>>(out, aux, static_cast<const float*>(bias), rows,
                                                  cols);
  } else {
    BiasGeluKernel<<<grid, kThreads, 0, stream>>>(out, aux, static_cast<const bf16*>(bias), rows,
                                                  cols);
  }
  return CheckLaunch("BiasGeluKernel");
}

}  // namespace

int64_t ColumnSumScratchFloats(int64_t rows, int64_t cols) {
  return int64_t(ColumnChunks(rows).chunks) * cols;
}

absl::Status LaunchColumnSum(void* dst, DType dst_dtype, const void* src, DType src_dtype,
                             int64_t rows, int64_t cols, float* scratch, cudaStream_t stream) {
  if (cols == 0 || rows == 0) return absl::OkStatus();  // += 0
  const ColumnChunking ch = ColumnChunks(rows);
  if (src_dtype == DType::kF32) {
    WEFT_RETURN_IF_ERROR(ColumnPartials<float>(src, scratch, rows, cols, ch, stream));
  } else {
    WEFT_RETURN_IF_ERROR(ColumnPartials<bf16>(src, scratch, rows, cols, ch, stream));
  }
  if (dst_dtype == DType::kF32) return ColumnFinalize<float>(dst, scratch, cols, ch, stream);
  return ColumnFinalize<bf16>(dst, scratch, cols, ch, stream);
}

absl::Status LaunchAddBias(void* out, DType out_dtype, const void* bias, DType bias_dtype,
                           int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows * cols == 0) return absl::OkStatus();
  if (out_dtype == DType::kF32) {
    return AddBiasT(static_cast<float*>(out), bias, bias_dtype, rows, cols, stream);
  }
  return AddBiasT(static_cast<bf16*>(out), bias, bias_dtype, rows, cols, stream);
}

absl::Status LaunchBiasGelu(void* out, void* aux, DType dtype, const void* bias,
                            DType bias_dtype, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows * cols == 0) return absl::OkStatus();
  if (dtype == DType::kF32) {
    return BiasGeluT(static_cast<float*>(out), static_cast<float*>(aux), bias, bias_dtype, rows,
                     cols, stream);
  }
  return BiasGeluT(static_cast<bf16*>(out), static_cast<bf16*>(aux), bias, bias_dtype, rows, cols,
                   stream);
}


}  // namespace weft::cuda
