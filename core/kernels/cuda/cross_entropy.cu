// Fused softmax + cross-entropy. One block per row: pass 1 keeps a running
// (max, sum of exp) per thread over the row (one read, no separate max
// pass), combined across the block in a fixed tree; pass 2 rereads the row
// (mostly from L2) and overwrites it with the gradient. Full-vocabulary
// probabilities are never stored.
#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/cross_entropy.h"

namespace weft::cuda {
namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ void Accumulate(MaxSum& st, float x) {
  if (x > st.m) {
    st.s = st.s * expf(st.m - x) + 1.0f;  // 0 * exp(-inf) = 0 on the first value
    st.m = x;
  } else if (st.m != -INFINITY) {  // x = -inf on an empty state adds nothing
    st.s += expf(x - st.m);
  } else if (x != x) {
    st.s = x;  // NaN logits propagate to the loss
  }
}

template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    CrossEntropyKernel(float* __restrict__ losses, T* __restrict__ logits,
                       const int32_t* __restrict__ targets, int64_t vocab, int64_t padded,
                       float dloss_scale, bool compute_grad) {
  __shared__ MaxSum warp_states[kThreads / kWarpSize];
  const int64_t row = blockIdx.x;
  T* z = logits + row * padded;
  const int32_t y = targets[row];
  const bool ignored = y < 0;
  const bool invalid = y >= vocab;
  if (ignored || invalid) {  // uniform across the block
    if (threadIdx.x == 0) losses[row] = ignored ? 0.0f : NAN;
    if (compute_grad) {
      const float zeros[V] = {};
      for (int64_t i = int64_t(threadIdx.x) * V; i < padded; i += int64_t(blockDim.x) * V) {
        StoreF<V>(z + i, zeros);
      }
    }
    return;
  }

  MaxSum st{-INFINITY, 0.0f};
  for (int64_t i = int64_t(threadIdx.x) * V; i < padded; i += int64_t(blockDim.x) * V) {
    float f[V];
    LoadF<V>(z + i, f);
    if (i + V <= vocab) {
      // A whole vector of real logits: rescale at most once per vector
      // instead of branching per element.
      float m = f[0];
#pragma unroll
      for (int k = 1; k < V; ++k) m = fmaxf(m, f[k]);
      bool nan = false;
#pragma unroll
      for (int k = 0; k < V; ++k) nan |= f[k] != f[k];
      if (nan) {
        st.s = NAN;  // NaN logits propagate to the loss
        continue;
      }
      if (m == -INFINITY) continue;  // adds nothing
      if (m > st.m) {
        st.s *= expf(st.m - m);  // 0 * exp(-inf) = 0 on the first vector
        st.m = m;
      }
      float add = 0.0f;
#pragma unroll
      for (int k = 0; k < V; ++k) add += expf(f[k] - st.m);
      st.s += add;
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        if (i + k < vocab) Accumulate(st, f[k]);
      }
    }
  }
  st = WarpCombine(st);
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  if (lane == 0) warp_states[warp] = st;
  __syncthreads();
  if (warp == 0) {
    MaxSum w = lane < kThreads / kWarpSize ? warp_states[lane] : MaxSum{-INFINITY, 0.0f};
    w = WarpCombine(w);
    if (lane == 0) warp_states[0] = w;
  }
  __syncthreads();
  const MaxSum total = warp_states[0];
  const float lse = total.m + logf(total.s);
  // Every thread reads z[y] before the barrier below, so pass 2 cannot
  // overwrite it first.
  const float zy = ToF(z[y]);
  if (threadIdx.x == 0) losses[row] = lse - zy;
  if (!compute_grad) return;
  __syncthreads();
  for (int64_t i = int64_t(threadIdx.x) * V; i < padded; i += int64_t(blockDim.x) * V) {
    float f[V];
    LoadF<V>(z + i, f);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const int64_t c = i + k;
      f[k] = c < vocab ? dloss_scale * (expf(f[k] - lse) - (c == y ? 1.0f : 0.0f)) : 0.0f;
    }
    StoreF<V>(z + i, f);
  }
}

template <typename T>
absl::Status LaunchT(float* losses, T* logits, const int32_t* targets, int64_t rows,
                     int64_t vocab, int64_t padded, float dloss_scale, bool compute_grad,
                     cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  const unsigned grid = static_cast<unsigned>(rows);
  if (padded % V == 0 && Aligned16(logits)) {
    CrossEntropyKernel<T, V><<<grid, kThreads, 0, stream>>>(losses, logits, targets, vocab,
                                                            padded, dloss_scale, compute_grad);
  } else {
    CrossEntropyKernel<T, 1><<<grid, kThreads, 0, stream>>>(losses, logits, targets, vocab,
                                                            padded, dloss_scale, compute_grad);
  }
  return CheckLaunch("CrossEntropyKernel");
}

}  // namespace

absl::Status LaunchCrossEntropy(float* losses, void* logits, DType dtype, const int32_t* targets,
                                int64_t rows, int64_t vocab, int64_t padded_vocab,
                                float dloss_scale, bool compute_grad, cudaStream_t stream) {
  if (rows == 0) return absl::OkStatus();
  if (dtype == DType::kF32) {
    return LaunchT(losses, static_cast<float*>(logits), targets, rows, vocab, padded_vocab,
                   dloss_scale, compute_grad, stream);
  }
  return LaunchT(losses, static_cast<bf16*>(logits), targets, rows, vocab, padded_vocab,
                 dloss_scale, compute_grad, stream);
}

}  // namespace weft::cuda
