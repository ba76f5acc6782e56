// Rotary position embedding fused with grouped-query packing. An item is V
// consecutive pair indices [i, i + V) (element i pairs with i + D/2) of one
// K/V head g of one token: it reads that head's k and v once and handles the
// H/G query heads that share it, so every element is read once and written
// once, in both directions. Memory-bound: 16-byte accesses when D/2 is a
// multiple of the vector width and every pointer is 16-byte aligned, scalar
// otherwise; both compute each element identically.
#include <initializer_list>

#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/rope.h"

namespace weft::cuda {
namespace {

constexpr int kThreads = 256;

// TokenChunks::Position, which is host-only C++ (token_chunks.h). The
// offset is selected, not indexed: a computed index into a kernel
// parameter would copy the struct to local memory in every thread.
__device__ __forceinline__ int64_t PositionOf(const TokenChunks& c, int64_t t) {
  const int64_t chunk = t / c.chunk_len;
  int64_t offset = c.offsets[0];
#pragma unroll
  for (int i = 1; i < TokenChunks::kMaxChunks; ++i) offset = chunk == i ? c.offsets[i] : offset;
  return offset + (t - chunk * c.chunk_len);
}

// Where item idx sits: token b * T + t, K/V head g, first pair index i.
struct Item {
  int64_t token, g, i;
};

template <int V>
__device__ __forceinline__ Item ItemOf(int64_t idx, const RopeDims& d) {
  const int64_t vecs = d.d / 2 / V, per_token = d.g * vecs;
  const int64_t token = idx / per_token, rem = idx - token * per_token;
  const int64_t g = rem / vecs;
  return {token, g, (rem - g * vecs) * V};
}

// cos and sin of pairs [i, i + V) at the token's position.
template <int V>
__device__ __forceinline__ void LoadAngles(const float* __restrict__ rope,
                                           const TokenChunks& positions, const RopeDims& d,
                                           const Item& it, float (&cs)[V], float (&sn)[V]) {
  const float* r = rope + PositionOf(positions, it.token % d.t) * d.d + it.i;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    cs[k] = r[k];
    sn[k] = r[d.d / 2 + k];
  }
}

// (x0, x1) <- (x0 cos - x1 sin, x1 cos + x0 sin); with sin negated, the
// transpose.
template <int V>
__device__ __forceinline__ void Rotate(float (&x0)[V], float (&x1)[V], const float (&cs)[V],
                                       const float (&sn)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float a = x0[k], b = x1[k];
    x0[k] = a * cs[k] - b * sn[k];
    x1[k] = b * cs[k] + a * sn[k];
  }
}

template <typename T, int V>
__global__ void RopeQkvForwardKernel(T* __restrict__ qkv, const T* __restrict__ q,
                                     const T* __restrict__ k, const T* __restrict__ v,
                                     const float* __restrict__ rope, const TokenChunks positions,
                                     const RopeDims d) {
  const int64_t half = d.d / 2, group = d.h / d.g, c = d.h * d.d, kv_c = d.g * d.d;
  const int64_t n = d.b * d.t * d.g * (half / V);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const Item it = ItemOf<V>(idx, d);
    float cs[V], sn[V];
    LoadAngles<V>(rope, positions, d, it, cs, sn);
    const int64_t kv_at = it.token * kv_c + it.g * d.d + it.i;
    float k0[V], k1[V], v0[V], v1[V];
    LoadF<V>(k + kv_at, k0);
    LoadF<V>(k + kv_at + half, k1);
    LoadF<V>(v + kv_at, v0);
    LoadF<V>(v + kv_at + half, v1);
    Rotate<V>(k0, k1, cs, sn);
    const T* const q_row = q + it.token * c;
    T* const out = qkv + it.token * 3 * c;
    for (int64_t j = 0; j < group; ++j) {
      const int64_t at = (it.g * group + j) * d.d + it.i;  // query head g * group + j
      float q0[V], q1[V];
      LoadF<V>(q_row + at, q0);
      LoadF<V>(q_row + at + half, q1);
      Rotate<V>(q0, q1, cs, sn);
      StoreF<V>(out + at, q0);
      StoreF<V>(out + at + half, q1);
      StoreF<V>(out + c + at, k0);
      StoreF<V>(out + c + at + half, k1);
      StoreF<V>(out + 2 * c + at, v0);
      StoreF<V>(out + 2 * c + at + half, v1);
    }
  }
}

// Rotation is linear and the same for every head at a position, so a K/V
// head's gradient sums its query heads' (in head order) and rotates once.
template <typename T, int V>
__global__ void RopeQkvBackwardKernel(T* __restrict__ dq, T* __restrict__ dk,
                                      T* __restrict__ dv, const T* __restrict__ dqkv,
                                      const float* __restrict__ rope,
                                      const TokenChunks positions, const RopeDims d) {
  const int64_t half = d.d / 2, group = d.h / d.g, c = d.h * d.d, kv_c = d.g * d.d;
  const int64_t n = d.b * d.t * d.g * (half / V);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const Item it = ItemOf<V>(idx, d);
    float cs[V], sn[V];
    LoadAngles<V>(rope, positions, d, it, cs, sn);
#pragma unroll
    for (int k = 0; k < V; ++k) sn[k] = -sn[k];
    const T* const in = dqkv + it.token * 3 * c;
    T* const dq_row = dq + it.token * c;
    float k0[V] = {}, k1[V] = {}, v0[V] = {}, v1[V] = {};
    for (int64_t j = 0; j < group; ++j) {
      const int64_t at = (it.g * group + j) * d.d + it.i;
      float a0[V], a1[V];
      LoadF<V>(in + at, a0);
      LoadF<V>(in + at + half, a1);
      Rotate<V>(a0, a1, cs, sn);
      StoreF<V>(dq_row + at, a0);
      StoreF<V>(dq_row + at + half, a1);
      LoadF<V>(in + c + at, a0);
      LoadF<V>(in + c + at + half, a1);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        k0[k] += a0[k];
        k1[k] += a1[k];
      }
      LoadF<V>(in + 2 * c + at, a0);
      LoadF<V>(in + 2 * c + at + half, a1);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        v0[k] += a0[k];
        v1[k] += a1[k];
      }
    }
    Rotate<V>(k0, k1, cs, sn);
    const int64_t kv_at = it.token * kv_c + it.g * d.d + it.i;
    StoreF<V>(dk + kv_at, k0);
    StoreF<V>(dk + kv_at + half, k1);
    StoreF<V>(dv + kv_at, v0);
    StoreF<V>(dv + kv_at + half, v1);
  }
}

// The vector width for T: every pair index run of D/2 splits into whole
// vectors and every operand is 16-byte aligned, or 1.
template <typename T>
int VectorWidth(const RopeDims& d, std::initializer_list<const void*> ptrs) {
  constexpr int V = Packed128<T>::kSize;
  if ((d.d / 2) % V != 0) return 1;
  for (const void* p : ptrs) {
    if (!Aligned16(p)) return 1;
  }
  return V;
}

int64_t Items(const RopeDims& d, int v) { return d.b * d.t * d.g * (d.d / 2 / v); }

template <typename T>
absl::Status ForwardT(T* qkv, const T* q, const T* k, const T* v, const float* rope,
                      const TokenChunks& positions, const RopeDims& d, cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  if (VectorWidth<T>(d, {qkv, q, k, v}) == V) {
    RopeQkvForwardKernel<T, V><<<GridFor(Items(d, V), kThreads), kThreads, 0, stream>>>(
        qkv, q, k, v, rope, positions, d);
  } else {
    RopeQkvForwardKernel<T, 1><<<GridFor(Items(d, 1), kThreads), kThreads, 0, stream>>>(
        qkv, q, k, v, rope, positions, d);
  }
  return CheckLaunch("RopeQkvForwardKernel");
}

template <typename T>
absl::Status BackwardT(T* dq, T* dk, T* dv, const T* dqkv, const float* rope,
                       const TokenChunks& positions, const RopeDims& d, cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  if (VectorWidth<T>(d, {dq, dk, dv, dqkv}) == V) {
    RopeQkvBackwardKernel<T, V><<<GridFor(Items(d, V), kThreads), kThreads, 0, stream>>>(
        dq, dk, dv, dqkv, rope, positions, d);
  } else {
    RopeQkvBackwardKernel<T, 1><<<GridFor(Items(d, 1), kThreads), kThreads, 0, stream>>>(
        dq, dk, dv, dqkv, rope, positions, d);
  }
  return CheckLaunch("RopeQkvBackwardKernel");
}

}  // namespace

absl::Status LaunchRopeQkvForward(void* qkv, const void* q, const void* k, const void* v,
                                  const float* rope, const TokenChunks& positions, DType dtype,
                                  const RopeDims& dims, cudaStream_t stream) {
  if (Items(dims, 1) == 0) return absl::OkStatus();
  if (dtype == DType::kF32) {
    return ForwardT(static_cast<float*>(qkv), static_cast<const float*>(q),
                    static_cast<const float*>(k), static_cast<const float*>(v), rope, positions,
                    dims, stream);
  }
  return ForwardT(static_cast<bf16*>(qkv), static_cast<const bf16*>(q),
                  static_cast<const bf16*>(k), static_cast<const bf16*>(v), rope, positions, dims,
                  stream);
}

absl::Status LaunchRopeQkvBackward(void* dq, void* dk, void* dv, const void* dqkv,
                                   const float* rope, const TokenChunks& positions, DType dtype,
                                   const RopeDims& dims, cudaStream_t stream) {
  if (Items(dims, 1) == 0) return absl::OkStatus();
  if (dtype == DType::kF32) {
    return BackwardT(static_cast<float*>(dq), static_cast<float*>(dk), static_cast<float*>(dv),
                     static_cast<const float*>(dqkv), rope, positions, dims, stream);
  }
  return BackwardT(static_cast<bf16*>(dq), static_cast<bf16*>(dk), static_cast<bf16*>(dv),
                   static_cast<const bf16*>(dqkv), rope, positions, dims, stream);
}

}  // namespace weft::cuda
