// Device-side helpers shared by the CUDA kernel families: float conversion
// for the two compute dtypes (f32, bf16), 128-bit vector loads, and
// deterministic warp/block reductions.
//
// Determinism: every reduction here combines values in an order fixed by the
// thread layout (butterfly shuffles, then warp 0 over the per-warp results),
// never by timing, so a fixed launch shape gives bitwise-identical results.
#ifndef WEFT_CORE_KERNELS_CUDA_COMMON_CUH_
#define WEFT_CORE_KERNELS_CUDA_COMMON_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "core/base/status_macros.h"
#include "core/tensor/cuda/cuda_check.h"

namespace weft::cuda {

using bf16 = __nv_bfloat16;

constexpr int kWarpSize = 32;

__host__ __device__ constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Blocks for a grid-stride loop over `items` with `threads` per block. The
// cap keeps launches cheap; it is a constant (not derived from the device)
// so results never depend on which GPU ran them.
inline unsigned GridFor(int64_t items, int threads, int64_t max_blocks = 1 << 16) {
  return static_cast<unsigned>(std::clamp<int64_t>(CeilDiv(items, threads), 1, max_blocks));
}

// Every launcher ends with this: reports launch-configuration errors now
// (asynchronous faults surface at the next synchronizing call).
inline absl::Status CheckLaunch(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return CudaError(err, kernel, __FILE__, __LINE__);
  return absl::OkStatus();
}

// Conversions through f32: all arithmetic happens in f32, storage rounds to
// nearest even (matching the host's FloatToBf16Bits).
__device__ __forceinline__ float ToF(float v) { return v; }
__device__ __forceinline__ float ToF(bf16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T FromF(float v);
template <>
__device__ __forceinline__ float FromF<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 FromF<bf16>(float v) {
  return __float2bfloat16_rn(v);
}

// 16 bytes of T, loaded and stored as one 128-bit access. Callers check
// alignment on the host and fall back to scalar code otherwise.
template <typename T>
struct alignas(16) Packed128 {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

template <typename T>
__device__ __forceinline__ Packed128<T> Load128(const T* p) {
  Packed128<T> r;
  *reinterpret_cast<int4*>(&r) = *reinterpret_cast<const int4*>(p);
  return r;
}

// Streaming load: data read once should not evict reusable lines from L1.
template <typename T>
__device__ __forceinline__ Packed128<T> Load128Stream(const T* p) {
  Packed128<T> r;
  *reinterpret_cast<int4*>(&r) = __ldcs(reinterpret_cast<const int4*>(p));
  return r;
}

template <typename T>
__device__ __forceinline__ void Store128(T* p, const Packed128<T>& v) {
  *reinterpret_cast<int4*>(p) = *reinterpret_cast<const int4*>(&v);
}

// V consecutive elements as floats: one 128-bit access when V is the vector
// width of T (the caller guarantees alignment), scalar when V == 1.
template <int V, typename T>
__device__ __forceinline__ void LoadF(const T* p, float (&f)[V]) {
  if constexpr (V == 1) {
    f[0] = ToF(*p);
  } else {
    static_assert(V == Packed128<T>::kSize, "vector width must be 16 bytes");
    const Packed128<T> q = Load128(p);
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = ToF(q.v[k]);
  }
}

template <int V, typename T>
__device__ __forceinline__ void StoreF(T* p, const float (&f)[V]) {
  if constexpr (V == 1) {
    *p = FromF<T>(f[0]);
  } else {
    static_assert(V == Packed128<T>::kSize, "vector width must be 16 bytes");
    Packed128<T> q;
#pragma unroll
    for (int k = 0; k < V; ++k) q.v[k] = FromF<T>(f[k]);
    Store128(p, q);
  }
}

// The shared-window address of a generic pointer into shared memory.
__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Starts a 16-byte asynchronous copy global -> shared (cp.async, sm_80+;
// both addresses 16-byte aligned). It lands by the CpAsyncWait that covers
// the group CpAsyncCommit closes.
__device__ __forceinline__ void CpAsync16(void* shared_dst, const void* global_src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(SharedAddress(shared_dst)),
               "l"(global_src));
}

__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most `kPending` committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds at least
// 32 floats. The barrier before the scratch writes lets consecutive calls
// share one scratch. blockDim.x must be a multiple of 32 (at most 1024).
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int num_warps = blockDim.x / kWarpSize;
  v = WarpSum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < num_warps ? scratch[lane] : 0.0f;
  return WarpSum(v);
}

// Online-softmax state: running max m and sum s of exp(x - m).
struct MaxSum {
  float m;
  float s;
};

// Combines two partial states. Symmetric in its arguments (__fadd_rn keeps
// the compiler from contracting one product into an asymmetric fma), so
// butterfly shuffles give every lane the same bits.
__device__ __forceinline__ MaxSum Combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};
  return {m, __fadd_rn(__fmul_rn(a.s, expf(a.m - m)), __fmul_rn(b.s, expf(b.m - m)))};
}

__device__ __forceinline__ MaxSum WarpCombine(MaxSum v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum other{__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
    v = Combine(v, other);
  }
  return v;
}

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_COMMON_CUH_
