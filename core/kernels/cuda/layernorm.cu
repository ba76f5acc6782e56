// Layernorm kernels. Forward: one warp per row, two passes over the row for
// mean and then variance (numerically safer than E[x^2] - E[x]^2; the row is
// L1-resident for the second read). Backward: one warp per row for dx, and a
// separate column-parallel pass for dweight/dbias so those reductions run in
// a fixed order (see column_reduce.cuh) rather than with atomics.
#include <initializer_list>

#include "core/kernels/cuda/column_reduce.cuh"
#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/layernorm.h"

namespace weft::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;

// kResidual: x is computed as a + b, stored to `res`, and read back from there.
template <typename T, int V, bool kResidual>
__global__ void LayerNormForwardKernel(T* __restrict__ out, float* __restrict__ mean,
                                       float* __restrict__ rstd, const T* x, T* res,
                                       const T* a, const T* b,
                                       const T* __restrict__ weight, const T* __restrict__ bias,
                                       int64_t rows, int channels, float eps) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // whole warp exits together
  const int64_t base = row * channels;
  const T* xr = x + base;
  float sum = 0.0f;
  if constexpr (kResidual) {
    // Each lane rereads only what it wrote itself, so no barrier is needed.
    xr = res + base;
    for (int i = lane * V; i < channels; i += kWarpSize * V) {
      float fa[V], fb[V], fr[V];
      LoadF<V>(a + base + i, fa);
      LoadF<V>(b + base + i, fb);
#pragma unroll
      for (int k = 0; k < V; ++k) fr[k] = fa[k] + fb[k];
      StoreF<V>(res + base + i, fr);
    }
  }
  for (int i = lane * V; i < channels; i += kWarpSize * V) {
    float f[V];
    LoadF<V>(xr + i, f);
#pragma unroll
    for (int k = 0; k < V; ++k) sum += f[k];
  }
  const float m = WarpSum(sum) / channels;
  float sq = 0.0f;
  for (int i = lane * V; i < channels; i += kWarpSize * V) {
    float f[V];
    LoadF<V>(xr + i, f);
#pragma unroll
    for (int k = 0; k < V; ++k) sq += (f[k] - m) * (f[k] - m);
  }
  const float rs = 1.0f / sqrtf(WarpSum(sq) / channels + eps);
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
  for (int i = lane * V; i < channels; i += kWarpSize * V) {
    float f[V], w[V], bb[V] = {};
    LoadF<V>(xr + i, f);
    LoadF<V>(weight + i, w);
    if (bias != nullptr) LoadF<V>(bias + i, bb);
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = (f[k] - m) * rs * w[k] + bb[k];
    StoreF<V>(out + base + i, f);
  }
}

// dx for one row per warp:
//   dx = rstd * (dy*w - mean(dy*w) - xhat * mean(dy*w*xhat))
template <typename T, int V>
__global__ void LayerNormBackwardDxKernel(T* dx, const T* dy,
                                          const T* __restrict__ x, const T* __restrict__ weight,
                                          const float* __restrict__ mean,
                                          const float* __restrict__ rstd, int64_t rows,
                                          int channels, bool accumulate) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;
  const int64_t base = row * channels;
  const float m = mean[row], rs = rstd[row];
  float s1 = 0.0f, s2 = 0.0f;
  for (int i = lane * V; i < channels; i += kWarpSize * V) {
    float g[V], f[V], w[V];
    LoadF<V>(dy + base + i, g);
    LoadF<V>(x + base + i, f);
    LoadF<V>(weight + i, w);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float dyw = g[k] * w[k];
      s1 += dyw;
      s2 += dyw * (f[k] - m) * rs;
    }
  }
  s1 = WarpSum(s1) / channels;
  s2 = WarpSum(s2) / channels;
  for (int i = lane * V; i < channels; i += kWarpSize * V) {
    float g[V], f[V], w[V], old[V] = {};
    LoadF<V>(dy + base + i, g);
    LoadF<V>(x + base + i, f);
    LoadF<V>(weight + i, w);
    if (accumulate) LoadF<V>(dx + base + i, old);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float xhat = (f[k] - m) * rs;
      g[k] = old[k] + (g[k] * w[k] - s1 - xhat * s2) * rs;
    }
    StoreF<V>(dx + base + i, g);
  }
}

// Stage 1 of dweight/dbias: like ColumnPartialsKernel, with two sums.
// partials rows [0, chunks) hold dweight's, [chunks, 2*chunks) dbias's.
template <typename T>
__global__ void LayerNormParamPartialsKernel(float* __restrict__ partials,
                                             const T* __restrict__ dy, const T* __restrict__ x,
                                             const float* __restrict__ mean,
                                             const float* __restrict__ rstd, int64_t rows,
                                             int64_t channels, int rows_per_chunk) {
  __shared__ float sw[kColRowLanes][kColTile];
  __shared__ float sb[kColRowLanes][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = int64_t(blockIdx.x) * kColTile + tx;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  float acc_w = 0.0f, acc_b = 0.0f;
  if (c < channels) {
    for (int64_t r = r0 + ty; r < r1; r += kColRowLanes) {
      const float g = ToF(dy[r * channels + c]);
      acc_w += g * (ToF(x[r * channels + c]) - mean[r]) * rstd[r];
      acc_b += g;
    }
  }
  sw[ty][tx] = acc_w;
  sb[ty][tx] = acc_b;
  __syncthreads();
  if (ty == 0 && c < channels) {
    float tw = 0.0f, tb = 0.0f;
#pragma unroll
    for (int k = 0; k < kColRowLanes; ++k) {
      tw += sw[k][tx];
      tb += sb[k][tx];
    }
    partials[int64_t(blockIdx.y) * channels + c] = tw;
    partials[int64_t(gridDim.y + blockIdx.y) * channels + c] = tb;
  }
}

// The same partials with V adjacent columns per thread (16-byte loads of dy
// and x); rows are visited and added in the same order, so bitwise equal.
template <typename T>
__global__ void LayerNormParamPartialsVecKernel(float* __restrict__ partials,
                                                const T* __restrict__ dy, const T* __restrict__ x,
                                                const float* __restrict__ mean,
                                                const float* __restrict__ rstd, int64_t rows,
                                                int64_t channels, int rows_per_chunk) {
  constexpr int V = Packed128<T>::kSize;
  __shared__ float sw[kColRowLanes][kColTile * V];
  __shared__ float sb[kColRowLanes][kColTile * V];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = (int64_t(blockIdx.x) * kColTile + tx) * V;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  float acc_w[V] = {}, acc_b[V] = {};
  if (c < channels) {
    for (int64_t r = r0 + ty; r < r1; r += kColRowLanes) {
      float g[V], f[V];
      LoadF<V>(dy + r * channels + c, g);
      LoadF<V>(x + r * channels + c, f);
      const float m = mean[r], rs = rstd[r];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        acc_w[k] += g[k] * (f[k] - m) * rs;
        acc_b[k] += g[k];
      }
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    sw[ty][tx * V + k] = acc_w[k];
    sb[ty][tx * V + k] = acc_b[k];
  }
  __syncthreads();
  const int i = ty * kColTile + tx;
  for (int col = i; col < kColTile * V; col += kColTile * kColRowLanes) {
    const int64_t gc = int64_t(blockIdx.x) * kColTile * V + col;
    if (gc >= channels) continue;
    float tw = 0.0f, tb = 0.0f;
#pragma unroll
    for (int k = 0; k < kColRowLanes; ++k) {
      tw += sw[k][col];
      tb += sb[k][col];
    }
    partials[int64_t(blockIdx.y) * channels + gc] = tw;
    partials[int64_t(gridDim.y + blockIdx.y) * channels + gc] = tb;
  }
}

template <typename T>
int VectorWidth(int64_t channels, std::initializer_list<const void*> ptrs) {
  constexpr int V = Packed128<T>::kSize;
  if (channels % V != 0) return 1;
  for (const void* p : ptrs) {
    if (p != nullptr && !Aligned16(p)) return 1;
  }
  return V;
}

template <typename T, bool kResidual>
absl::Status ForwardT(T* out, float* mean, float* rstd, const T* x, T* res, const T* a,
                      const T* b, const T* weight, const T* bias, int64_t rows, int channels,
                      float eps, cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  const unsigned grid = static_cast<unsigned>(CeilDiv(rows, kWarpsPerBlock));
  if (VectorWidth<T>(channels, {out, x, res, a, b, weight, bias}) == V) {
    LayerNormForwardKernel<T, V, kResidual><<<grid, kThreads, 0, stream>>>(
        out, mean, rstd, x, res, a, b, weight, bias, rows, channels, eps);
  } else {
    LayerNormForwardKernel<T, 1, kResidual><<<grid, kThreads, 0, stream>>>(
        out, mean, rstd, x, res, a, b, weight, bias, rows, channels, eps);
  }
  return CheckLaunch("LayerNormForwardKernel");
}

template <typename T>
absl::Status BackwardT(T* dx, void* dweight, void* dbias, DType grad_dtype, const T* dy,
                       const T* x, const T* weight, const float* mean, const float* rstd,
                       int64_t rows, int channels, bool accumulate_dx, float* scratch,
                       cudaStream_t stream) {
  // dweight/dbias first, then dx: dx may overwrite dy in place.
  const ColumnChunking ch = ColumnChunks(rows);
  if (VectorWidth<T>(channels, {dy, x}) == Packed128<T>::kSize) {
    const dim3 pgrid(static_cast<unsigned>(CeilDiv(channels, kColTile * Packed128<T>::kSize)),
                     ch.chunks);
    LayerNormParamPartialsVecKernel<T><<<pgrid, dim3(kColTile, kColRowLanes), 0, stream>>>(
        scratch, dy, x, mean, rstd, rows, channels, ch.rows_per_chunk);
  } else {
    const dim3 pgrid(static_cast<unsigned>(CeilDiv(channels, kColTile)), ch.chunks);
    LayerNormParamPartialsKernel<T><<<pgrid, dim3(kColTile, kColRowLanes), 0, stream>>>(
        scratch, dy, x, mean, rstd, rows, channels, ch.rows_per_chunk);
  }
  WEFT_RETURN_IF_ERROR(CheckLaunch("LayerNormParamPartialsKernel"));
  // grid.y = 1 skips dbias's half of the partials when there is no bias.
  const dim3 fgrid(static_cast<unsigned>(CeilDiv(channels, 256)), dbias != nullptr ? 2 : 1);
  if (grad_dtype == DType::kF32) {
    ColumnFinalizeKernel<float><<<fgrid, 256, 0, stream>>>(
        static_cast<float*>(dweight), static_cast<float*>(dbias), scratch, ch.chunks, channels);
  } else {
    ColumnFinalizeKernel<bf16><<<fgrid, 256, 0, stream>>>(
        static_cast<bf16*>(dweight), static_cast<bf16*>(dbias), scratch, ch.chunks, channels);
  }
  WEFT_RETURN_IF_ERROR(CheckLaunch("ColumnFinalizeKernel"));

  constexpr int V = Packed128<T>::kSize;
  const unsigned grid = static_cast<unsigned>(CeilDiv(rows, kWarpsPerBlock));
  if (VectorWidth<T>(channels, {dx, dy, x, weight}) == V) {
    LayerNormBackwardDxKernel<T, V><<<grid, kThreads, 0, stream>>>(dx, dy, x, weight, mean, rstd,
                                                                  rows, channels, accumulate_dx);
  } else {
    LayerNormBackwardDxKernel<T, 1><<<grid, kThreads, 0, stream>>>(dx, dy, x, weight, mean, rstd,
                                                                  rows, channels, accumulate_dx);
  }
  return CheckLaunch("LayerNormBackwardDxKernel");
}

}  // namespace

absl::Status LaunchLayerNormForward(void* out, float* mean, float* rstd, const void* x,
                                    const void* weight, const void* bias, DType dtype,
                                    int64_t rows, int64_t channels, float eps,
                                    cudaStream_t stream) {
  if (rows == 0) return absl::OkStatus();
  const int c = static_cast<int>(channels);
  if (dtype == DType::kF32) {
    return ForwardT<float, false>(static_cast<float*>(out), mean, rstd,
                                  static_cast<const float*>(x), nullptr, nullptr, nullptr,
                                  static_cast<const float*>(weight),
                                  static_cast<const float*>(bias), rows, c, eps, stream);
  }
  return ForwardT<bf16, false>(static_cast<bf16*>(out), mean, rstd, static_cast<const bf16*>(x),
                               nullptr, nullptr, nullptr, static_cast<const bf16*>(weight),
                               static_cast<const bf16*>(bias), rows, c, eps, stream);
}

absl::Status LaunchResidualLayerNormForward(void* residual_out, void* out, float* mean,
                                            float* rstd, const void* a, const void* b,
                                            const void* weight, const void* bias, DType dtype,
                                            int64_t rows, int64_t channels, float eps,
                                            cudaStream_t stream) {
  if (rows == 0) return absl::OkStatus();
  const int c = static_cast<int>(channels);
  if (dtype == DType::kF32) {
    return ForwardT<float, true>(
        static_cast<float*>(out), mean, rstd, nullptr, static_cast<float*>(residual_out),
        static_cast<const float*>(a), static_cast<const float*>(b),
        static_cast<const float*>(weight), static_cast<const float*>(bias), rows, c, eps, stream);
  }
  return ForwardT<bf16, true>(static_cast<bf16*>(out), mean, rstd, nullptr,
                              static_cast<bf16*>(residual_out), static_cast<const bf16*>(a),
                              static_cast<const bf16*>(b), static_cast<const bf16*>(weight),
                              static_cast<const bf16*>(bias), rows, c, eps, stream);
}

int64_t LayerNormBackwardScratchFloats(int64_t rows, int64_t channels) {
  return 2 * int64_t(ColumnChunks(rows).chunks) * channels;
}

absl::Status LaunchLayerNormBackward(void* dx, void* dweight, void* dbias, DType grad_dtype,
                                     const void* dy, const void* x, const void* weight,
                                     const float* mean, const float* rstd, DType dtype,
                                     int64_t rows, int64_t channels, bool accumulate_dx,
                                     float* scratch, cudaStream_t stream) {
  if (rows == 0 || channels == 0) return absl::OkStatus();
  const int c = static_cast<int>(channels);
  if (dtype == DType::kF32) {
    return BackwardT(static_cast<float*>(dx), dweight, dbias, grad_dtype,
                     static_cast<const float*>(dy), static_cast<const float*>(x),
                     static_cast<const float*>(weight), mean, rstd, rows, c, accumulate_dx,
                     scratch, stream);
  }
  return BackwardT(static_cast<bf16*>(dx), dweight, dbias, grad_dtype,
                   static_cast<const bf16*>(dy), static_cast<const bf16*>(x),
                   static_cast<const bf16*>(weight), mean, rstd, rows, c, accumulate_dx, scratch,
                   stream);
}

}  // namespace weft::cuda
