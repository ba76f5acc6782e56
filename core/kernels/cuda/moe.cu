// Mixture-of-experts kernels: one thread per token for the router (E is
// small: tens of experts), grid-stride loops over elements for the row
// permutations, one warp per (token, choice) for the gate dot products.
#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/moe.h"

namespace weft::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void RouterTopKKernel(float* probs, float* lse, int32_t* idx, float* gates,
                                 const T* logits, int64_t n, int e, int k, bool sigmoid,
                                 bool normalize) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const T* row = logits + t * e;
  float mx = -INFINITY;
  for (int j = 0; j < e; ++j) mx = fmaxf(mx, ToF(row[j]));
  float sum = 0.f;
  for (int j = 0; j < e; ++j) sum += expf(ToF(row[j]) - mx);
  lse[t] = mx + logf(sum);
  float* p = probs + t * e;
  for (int j = 0; j < e; ++j) {
    p[j] = sigmoid ? 1.f / (1.f + expf(-ToF(row[j]))) : expf(ToF(row[j]) - mx) / sum;
  }
  // k passes, each taking the best expert not yet taken; strict > keeps
  // the lower index on ties (as the CPU's partial sort).
  int32_t* ix = idx + t * k;
  float chosen = 0.f;
  for (int c = 0; c < k; ++c) {
    int best = -1;
    for (int j = 0; j < e; ++j) {
      bool taken = false;
      for (int q = 0; q < c; ++q) taken = taken || ix[q] == j;
      if (!taken && (best < 0 || p[j] > p[best])) best = j;
    }
    ix[c] = best;
    chosen += p[best];
  }
  for (int c = 0; c < k; ++c) gates[t * k + c] = normalize ? p[ix[c]] / chosen : p[ix[c]];
}

template <typename T>
__global__ void RouterTopKBackwardKernel(T* dlogits, const float* dgates, const float* probs,
                                         const float* lse, const int32_t* idx,
                                         const float* extra, float lse_scale, int64_t n, int e,
                                         int k, bool sigmoid, bool normalize) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const float* p = probs + t * e;
  const int32_t* ix = idx + t * k;
  const float* dg = dgates + t * k;
  // dL/dp of the chosen experts from the gates (see the CPU reference).
  float dchosen[kRouterMaxTopK];
  if (!normalize) {
    for (int c = 0; c < k; ++c) dchosen[c] = dg[c];
  } else {
    float s = 0.f, dot = 0.f;
    for (int c = 0; c < k; ++c) s += p[ix[c]];
    for (int c = 0; c < k; ++c) dot += dg[c] * (p[ix[c]] / s);
    for (int c = 0; c < k; ++c) dchosen[c] = (dg[c] - dot) / s;
  }
  auto dp = [&](int j) {
    float v = extra != nullptr ? extra[t * e + j] : 0.f;
    for (int c = 0; c < k; ++c) v += ix[c] == j ? dchosen[c] : 0.f;
    return v;
  };
  if (sigmoid) {
    for (int j = 0; j < e; ++j) dlogits[t * e + j] = FromF<T>(p[j] * (1.f - p[j]) * dp(j));
    return;
  }
  float pdp = 0.f;
  for (int j = 0; j < e; ++j) pdp += p[j] * dp(j);
  const float dlse = lse_scale * lse[t];
  for (int j = 0; j < e; ++j) dlogits[t * e + j] = FromF<T>(p[j] * (dp(j) - pdp + dlse));
}

template <typename T>
__global__ void GatherRowsKernel(T* out, const T* x, const int32_t* assign, const float* w,
                                 int64_t m, int64_t c, int k) {
  const int64_t total = m * c;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / c, col = i % c;
    const int32_t a = assign[row];
    const float scale = w != nullptr ? w[a] : 1.f;
    out[i] = FromF<T>(scale * ToF(x[(a / k) * c + col]));
  }
}

template <typename T>
__global__ void CombineRowsKernel(T* out, const T* src, const int32_t* slots, const float* w,
                                  int64_t n, int64_t c, int k, bool accumulate) {
  const int64_t total = n * c;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / c, col = i % c;
    float acc = accumulate ? ToF(out[i]) : 0.f;
    for (int j = 0; j < k; ++j) {
      const int32_t s = slots[t * k + j];
      if (s < 0) continue;
      acc += (w != nullptr ? w[t * k + j] : 1.f) * ToF(src[int64_t(s) * c + col]);
    }
    out[i] = FromF<T>(acc);
  }
}

template <typename T>
__global__ void RowDotsKernel(float* out, const T* dy, const T* src, const int32_t* slots,
                              int64_t n, int64_t c, int k) {
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (warp >= n * k) return;
  const int32_t s = slots[warp];
  const int64_t t = warp / k;
  float acc = 0.f;
  if (s >= 0) {
    for (int64_t i = lane; i < c; i += kWarpSize) {
      acc += ToF(dy[t * c + i]) * ToF(src[int64_t(s) * c + i]);
    }
  }
  for (int off = kWarpSize / 2; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) out[warp] = acc;
}

}  // namespace

absl::Status LaunchRouterTopK(float* probs, float* lse, int32_t* idx, float* gates,
                              const void* logits, DType dtype, int64_t n, int e, int k,
                              bool sigmoid, bool normalize, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  const unsigned blocks = static_cast<unsigned>(CeilDiv(n, kThreads));
  if (dtype == DType::kF32) {
    RouterTopKKernel<<<blocks, kThreads, 0, stream>>>(probs, lse, idx, gates,
                                                       static_cast<const float*>(logits), n, e, k,
                                                       sigmoid, normalize);
  } else {
    RouterTopKKernel<<<blocks, kThreads, 0, stream>>>(probs, lse, idx, gates,
                                                       static_cast<const bf16*>(logits), n, e, k,
                                                       sigmoid, normalize);
  }
  return CheckLaunch("RouterTopKKernel");
}

absl::Status LaunchRouterTopKBackward(void* dlogits, DType dtype, const float* dgates,
                                      const float* probs, const float* lse, const int32_t* idx,
                                      const float* dprobs_extra, float lse_scale, int64_t n,
                                      int e, int k, bool sigmoid, bool normalize,
                                      cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  const unsigned blocks = static_cast<unsigned>(CeilDiv(n, kThreads));
  if (dtype == DType::kF32) {
    RouterTopKBackwardKernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<float*>(dlogits), dgates, probs, lse, idx, dprobs_extra, lse_scale, n, e, k,
        sigmoid, normalize);
  } else {
    RouterTopKBackwardKernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<bf16*>(dlogits), dgates, probs, lse, idx, dprobs_extra, lse_scale, n, e, k,
        sigmoid, normalize);
  }
  return CheckLaunch("RouterTopKBackwardKernel");
}

absl::Status LaunchGatherRows(void* out, const void* x, const int32_t* assign,
                              const float* weights, DType dtype, int64_t m, int64_t c, int k,
                              cudaStream_t stream) {
  if (m * c == 0) return absl::OkStatus();
  const unsigned blocks = GridFor(m * c, kThreads);
  if (dtype == DType::kF32) {
    GatherRowsKernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<float*>(out), static_cast<const float*>(x), assign, weights, m, c, k);
  } else {
    GatherRowsKernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<bf16*>(out), static_cast<const bf16*>(x), assign, weights, m, c, k);
  }
  return CheckLaunch("GatherRowsKernel");
}

absl::Status LaunchCombineRows(void* out, const void* src, const int32_t* slots,
                               const float* weights, DType dtype, int64_t n, int64_t c, int k,
                               bool accumulate, cudaStream_t stream) {
  if (n * c == 0) return absl::OkStatus();
  const unsigned blocks = GridFor(n * c, kThreads);
  if (dtype == DType::kF32) {
    CombineRowsKernel<<<blocks, kThreads, 0, stream>>>(static_cast<float*>(out),
                                                        static_cast<const float*>(src), slots,
                                                        weights, n, c, k, accumulate);
  } else {
    CombineRowsKernel<<<blocks, kThreads, 0, stream>>>(static_cast<bf16*>(out),
                                                        static_cast<const bf16*>(src), slots,
                                                        weights, n, c, k, accumulate);
  }
  return CheckLaunch("CombineRowsKernel");
}

absl::Status LaunchRowDots(float* out, const void* dy, const void* src, const int32_t* slots,
                           DType dtype, int64_t n, int64_t c, int k, cudaStream_t stream) {
  if (n * k == 0) return absl::OkStatus();
  const unsigned blocks = static_cast<unsigned>(CeilDiv(n * k * kWarpSize, kThreads));
  if (dtype == DType::kF32) {
    RowDotsKernel<<<blocks, kThreads, 0, stream>>>(out, static_cast<const float*>(dy),
                                                    static_cast<const float*>(src), slots, n, c,
                                                    k);
  } else {
    RowDotsKernel<<<blocks, kThreads, 0, stream>>>(out, static_cast<const bf16*>(dy),
                                                    static_cast<const bf16*>(src), slots, n, c,
                                                    k);
  }
  return CheckLaunch("RowDotsKernel");
}

}  // namespace weft::cuda
