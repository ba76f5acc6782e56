// Elementwise kernels: GELU and SwiGLU forward/backward, Add, Scale. Memory-bound, so
// each thread moves 16 bytes per access when every operand is 16-byte
// aligned and the length is a multiple of the vector width; otherwise a
// scalar variant runs. Both variants compute each element identically.
#include <initializer_list>

#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/elementwise.h"
#include "core/kernels/cuda/gelu.cuh"
#include "core/base/status_macros.h"
#include "core/kernels/cuda/multi_tensor.cuh"

namespace weft::cuda {
namespace {

constexpr int kThreads = 256;

// V elements per step: V = Packed128<T>::kSize (vector path) or 1.
template <typename T, int V>
__global__ void GeluForwardKernel(T* out, const T* x, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * V;
  for (int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * V; i < n; i += stride) {
    if constexpr (V == 1) {
      out[i] = FromF<T>(Gelu(ToF(x[i])));
    } else {
      const Packed128<T> in = Load128Stream(x + i);
      Packed128<T> r;
#pragma unroll
      for (int k = 0; k < V; ++k) r.v[k] = FromF<T>(Gelu(ToF(in.v[k])));
      Store128(out + i, r);
    }
  }
}

template <typename T, int V>
__global__ void GeluBackwardKernel(T* dx, const T* dy, const T* x, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * V;
  for (int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * V; i < n; i += stride) {
    if constexpr (V == 1) {
      dx[i] = FromF<T>(ToF(dy[i]) * GeluGrad(ToF(x[i])));
    } else {
      const Packed128<T> g = Load128Stream(dy + i);
      const Packed128<T> in = Load128Stream(x + i);
      Packed128<T> r;
#pragma unroll
      for (int k = 0; k < V; ++k) r.v[k] = FromF<T>(ToF(g.v[k]) * GeluGrad(ToF(in.v[k])));
      Store128(dx + i, r);
    }
  }
}

// SwiGLU over rows of gate_up = [gate (h) | up (h)]; item i is V columns of
// one row (V divides h on the vector path). silu(g) = g * sigmoid(g), as the
// CPU computes it.
__device__ __forceinline__ float Sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

template <typename T, int V>
__global__ void SwiGluForwardKernel(T* out, const T* gate_up, int64_t rows, int64_t h) {
  const int64_t per_row = h / V, n = rows * per_row;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = i / per_row, j = (i - r * per_row) * V;
    const T* g = gate_up + r * 2 * h + j;
    float fg[V], fu[V];
    LoadF<V>(g, fg);
    LoadF<V>(g + h, fu);
#pragma unroll
    for (int k = 0; k < V; ++k) fg[k] = fg[k] * Sigmoid(fg[k]) * fu[k];
    StoreF<V>(out + r * h + j, fg);
  }
}

// Each item reads its gate and up before writing their gradients, so
// dgate_up may alias gate_up.
template <typename T, int V>
__global__ void SwiGluBackwardKernel(T* dgate_up, const T* dout, const T* gate_up, int64_t rows,
                                     int64_t h) {
  const int64_t per_row = h / V, n = rows * per_row;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = i / per_row, j = (i - r * per_row) * V;
    const T* g = gate_up + r * 2 * h + j;
    float fg[V], fu[V], d[V];
    LoadF<V>(g, fg);
    LoadF<V>(g + h, fu);
    LoadF<V>(dout + r * h + j, d);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float s = Sigmoid(fg[k]);
      const float silu = fg[k] * s;
      fg[k] = d[k] * fu[k] * (s * (1.0f + fg[k] * (1.0f - s)));  // d gate
      fu[k] = d[k] * silu;                                        // d up
    }
    T* dg = dgate_up + r * 2 * h + j;
    StoreF<V>(dg, fg);
    StoreF<V>(dg + h, fu);
  }
}

template <typename T, int V>
__global__ void AddSameKernel(T* out, const T* a, const T* b, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * V;
  for (int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * V; i < n; i += stride) {
    if constexpr (V == 1) {
      out[i] = FromF<T>(ToF(a[i]) + ToF(b[i]));
    } else {
      const Packed128<T> pa = Load128Stream(a + i);
      const Packed128<T> pb = Load128Stream(b + i);
      Packed128<T> r;
#pragma unroll
      for (int k = 0; k < V; ++k) r.v[k] = FromF<T>(ToF(pa.v[k]) + ToF(pb.v[k]));
      Store128(out + i, r);
    }
  }
}

// Mixed dtypes (e.g. a bf16 activation into an f32 accumulator): rare, scalar.
template <typename O, typename A, typename B>
__global__ void AddMixedKernel(O* out, const A* a, const B* b, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = FromF<O>(ToF(a[i]) + ToF(b[i]));
  }
}

template <typename T, int V>
__global__ void ScaleKernel(T* x, float scale, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * V;
  for (int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * V; i < n; i += stride) {
    if constexpr (V == 1) {
      x[i] = FromF<T>(ToF(x[i]) * scale);
    } else {
      Packed128<T> p = Load128(x + i);
#pragma unroll
      for (int k = 0; k < V; ++k) p.v[k] = FromF<T>(ToF(p.v[k]) * scale);
      Store128(x + i, p);
    }
  }
}

// True when the vector path applies to n elements of T at these pointers.
template <typename T>
bool CanVectorize(int64_t n, std::initializer_list<const void*> ptrs) {
  if (n % Packed128<T>::kSize != 0) return false;
  for (const void* p : ptrs) {
    if (!Aligned16(p)) return false;
  }
  return true;
}

template <typename T>
absl::Status GeluForwardT(T* out, const T* x, int64_t n, cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  if (CanVectorize<T>(n, {out, x})) {
    GeluForwardKernel<T, V><<<GridFor(n / V, kThreads), kThreads, 0, stream>>>(out, x, n);
  } else {
    GeluForwardKernel<T, 1><<<GridFor(n, kThreads), kThreads, 0, stream>>>(out, x, n);
  }
  return CheckLaunch("GeluForwardKernel");
}

template <typename T>
absl::Status GeluBackwardT(T* dx, const T* dy, const T* x, int64_t n, cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  if (CanVectorize<T>(n, {dx, dy, x})) {
    GeluBackwardKernel<T, V><<<GridFor(n / V, kThreads), kThreads, 0, stream>>>(dx, dy, x, n);
  } else {
    GeluBackwardKernel<T, 1><<<GridFor(n, kThreads), kThreads, 0, stream>>>(dx, dy, x, n);
  }
  return CheckLaunch("GeluBackwardKernel");
}

template <typename T>
absl::Status AddSameT(T* out, const T* a, const T* b, int64_t n, cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  if (CanVectorize<T>(n, {out, a, b})) {
    AddSameKernel<T, V><<<GridFor(n / V, kThreads), kThreads, 0, stream>>>(out, a, b, n);
  } else {
    AddSameKernel<T, 1><<<GridFor(n, kThreads), kThreads, 0, stream>>>(out, a, b, n);
  }
  return CheckLaunch("AddSameKernel");
}

template <typename T>
absl::Status SwiGluForwardT(T* out, const T* gate_up, int64_t rows, int64_t h,
                            cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  if (CanVectorize<T>(h, {out, gate_up})) {
    SwiGluForwardKernel<T, V><<<GridFor(rows * h / V, kThreads), kThreads, 0, stream>>>(
        out, gate_up, rows, h);
  } else {
    SwiGluForwardKernel<T, 1><<<GridFor(rows * h, kThreads), kThreads, 0, stream>>>(
        out, gate_up, rows, h);
  }
  return CheckLaunch("SwiGluForwardKernel");
}

template <typename T>
absl::Status SwiGluBackwardT(T* dgate_up, const T* dout, const T* gate_up, int64_t rows,
                             int64_t h, cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  if (CanVectorize<T>(h, {dgate_up, dout, gate_up})) {
    SwiGluBackwardKernel<T, V><<<GridFor(rows * h / V, kThreads), kThreads, 0, stream>>>(
        dgate_up, dout, gate_up, rows, h);
  } else {
    SwiGluBackwardKernel<T, 1><<<GridFor(rows * h, kThreads), kThreads, 0, stream>>>(
        dgate_up, dout, gate_up, rows, h);
  }
  return CheckLaunch("SwiGluBackwardKernel");
}

template <typename O, typename A>
absl::Status AddMixedB(O* out, const A* a, const void* b, DType b_dtype, int64_t n,
                       cudaStream_t stream) {
  if (b_dtype == DType::kF32) {
    AddMixedKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(
        out, a, static_cast<const float*>(b), n);
  } else {
    AddMixedKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(
        out, a, static_cast<const bf16*>(b), n);
  }
  return CheckLaunch("AddMixedKernel");
}

template <typename O>
absl::Status AddMixedA(O* out, const void* a, DType a_dtype, const void* b, DType b_dtype,
                       int64_t n, cudaStream_t stream) {
  if (a_dtype == DType::kF32) {
    return AddMixedB(out, static_cast<const float*>(a), b, b_dtype, n, stream);
  }
  return AddMixedB(out, static_cast<const bf16*>(a), b, b_dtype, n, stream);
}

template <typename T>
absl::Status ScaleT(T* x, float scale, int64_t n, cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  if (CanVectorize<T>(n, {x})) {
    ScaleKernel<T, V><<<GridFor(n / V, kThreads), kThreads, 0, stream>>>(x, scale, n);
  } else {
    ScaleKernel<T, 1><<<GridFor(n, kThreads), kThreads, 0, stream>>>(x, scale, n);
  }
  return CheckLaunch("ScaleKernel");
}

// Zeroing many buffers: each block clears one 64 KiB chunk of one buffer.
constexpr int64_t kZeroChunkBytes = 64 * 1024;

struct ZeroBatch {
  BlockMap map;
  uint8_t* ptr[kMaxTensorsPerLaunch];
  int64_t bytes[kMaxTensorsPerLaunch];
};

__global__ void __launch_bounds__(kThreads) ZeroManyKernel(const ZeroBatch batch) {
  const int s = TensorOfBlock(batch.map, blockIdx.x);
  const int64_t begin = int64_t(blockIdx.x - batch.map.block_start[s]) * kZeroChunkBytes;
  const int64_t end = min(batch.bytes[s], begin + kZeroChunkBytes);
  uint8_t* const p = batch.ptr[s];
  // Chunks start at multiples of 64 KiB, so an aligned buffer stays aligned.
  int64_t scalar_from = begin;
  if ((reinterpret_cast<uintptr_t>(p) & 15) == 0) {
    scalar_from = begin + ((end - begin) & ~int64_t{15});
    for (int64_t i = begin + 16 * int64_t(threadIdx.x); i < scalar_from; i += 16 * blockDim.x) {
      *reinterpret_cast<uint4*>(p + i) = make_uint4(0, 0, 0, 0);
    }
  }
  for (int64_t i = scalar_from + threadIdx.x; i < end; i += blockDim.x) p[i] = 0;
}

}  // namespace

absl::Status LaunchGeluForward(void* out, const void* x, DType dtype, int64_t n,
                               cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  if (dtype == DType::kF32) {
    return GeluForwardT(static_cast<float*>(out), static_cast<const float*>(x), n, stream);
  }
  return GeluForwardT(static_cast<bf16*>(out), static_cast<const bf16*>(x), n, stream);
}

absl::Status LaunchGeluBackward(void* dx, const void* dy, const void* x, DType dtype, int64_t n,
                                cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  if (dtype == DType::kF32) {
    return GeluBackwardT(static_cast<float*>(dx), static_cast<const float*>(dy),
                         static_cast<const float*>(x), n, stream);
  }
  return GeluBackwardT(static_cast<bf16*>(dx), static_cast<const bf16*>(dy),
                       static_cast<const bf16*>(x), n, stream);
}

absl::Status LaunchSwiGluForward(void* out, const void* gate_up, DType dtype, int64_t rows,
                                 int64_t h, cudaStream_t stream) {
  if (rows == 0 || h == 0) return absl::OkStatus();
  if (dtype == DType::kF32) {
    return SwiGluForwardT(static_cast<float*>(out), static_cast<const float*>(gate_up), rows, h,
                          stream);
  }
  return SwiGluForwardT(static_cast<bf16*>(out), static_cast<const bf16*>(gate_up), rows, h,
                        stream);
}

absl::Status LaunchSwiGluBackward(void* dgate_up, const void* dout, const void* gate_up,
                                  DType dtype, int64_t rows, int64_t h, cudaStream_t stream) {
  if (rows == 0 || h == 0) return absl::OkStatus();
  if (dtype == DType::kF32) {
    return SwiGluBackwardT(static_cast<float*>(dgate_up), static_cast<const float*>(dout),
                           static_cast<const float*>(gate_up), rows, h, stream);
  }
  return SwiGluBackwardT(static_cast<bf16*>(dgate_up), static_cast<const bf16*>(dout),
                         static_cast<const bf16*>(gate_up), rows, h, stream);
}

absl::Status LaunchAdd(void* out, DType out_dtype, const void* a, DType a_dtype, const void* b,
                       DType b_dtype, int64_t n, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  if (out_dtype == a_dtype && a_dtype == b_dtype) {
    if (out_dtype == DType::kF32) {
      return AddSameT(static_cast<float*>(out), static_cast<const float*>(a),
                      static_cast<const float*>(b), n, stream);
    }
    return AddSameT(static_cast<bf16*>(out), static_cast<const bf16*>(a),
                    static_cast<const bf16*>(b), n, stream);
  }
  if (out_dtype == DType::kF32) {
    return AddMixedA(static_cast<float*>(out), a, a_dtype, b, b_dtype, n, stream);
  }
  return AddMixedA(static_cast<bf16*>(out), a, a_dtype, b, b_dtype, n, stream);
}

absl::Status LaunchZeroMany(absl::Span<void* const> ptrs, absl::Span<const int64_t> bytes,
                            cudaStream_t stream) {
  for (size_t first = 0; first < ptrs.size(); first += kMaxTensorsPerLaunch) {
    const size_t count = std::min<size_t>(kMaxTensorsPerLaunch, ptrs.size() - first);
    ZeroBatch batch{};
    int64_t blocks = 0;
    for (size_t s = 0; s < count; ++s) {
      batch.map.block_start[s] = static_cast<int32_t>(blocks);
      batch.ptr[s] = static_cast<uint8_t*>(ptrs[first + s]);
      batch.bytes[s] = bytes[first + s];
      blocks += CeilDiv(bytes[first + s], kZeroChunkBytes);
    }
    batch.map.block_start[count] = static_cast<int32_t>(blocks);
    batch.map.count = static_cast<int32_t>(count);
    if (blocks == 0) continue;
    ZeroManyKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(batch);
    WEFT_RETURN_IF_ERROR(CheckLaunch("ZeroManyKernel"));
  }
  return absl::OkStatus();
}

absl::Status LaunchScale(void* x, DType dtype, float scale, int64_t n, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  if (dtype == DType::kF32) return ScaleT(static_cast<float*>(x), scale, n, stream);
  return ScaleT(static_cast<bf16*>(x), scale, n, stream);
}

}  // namespace weft::cuda
