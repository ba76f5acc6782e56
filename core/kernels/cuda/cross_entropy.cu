// Fused softmax + cross-entropy, and the same row passes split for the
// vocabulary-parallel loss (tensor parallelism), so that one shard holding
// every column reproduces the fused kernel bit for bit.
//
// One block per row: pass 1 keeps a running (max, sum of exp) per thread over
// the row's real columns (one read, no separate max pass), combined across
// the block in a fixed tree; pass 2 rereads the row (mostly from L2) and
// overwrites it with the gradient. Full-vocabulary probabilities are never
// stored. Where the row fits in shared memory twice per SM (bf16 at
// GPT-2's 50304 columns: 98 KiB), the resident kernel instead copies it
// there once with cp.async (all of it in flight at once) and runs both
// passes on that copy: the logits are read from memory once, not twice, and
// every value is computed by the same operations in the same order, so the
// bits are the two-pass kernel's. WEFT_CE_KERNEL=two-pass or =resident
// forces one (resident fails where the row does not fit). The vocabulary-parallel loss runs pass 1 per shard (Stats), lets
// the caller all-reduce the max, rescales the shard's sum to the global max
// (Rescale), all-reduces the sums, and runs pass 2 (Finish).
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/cross_entropy.h"
#include "core/kernels/cuda/device_info.h"
#include "core/kernels/vocab_shard.h"

namespace weft::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kRowThreads = 256;  // per-row statistics kernels (Rescale, losses)

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

// Vectors of V columns each thread keeps loading at once in the row passes.
// With one 16-byte load in flight a thread waits out the memory latency on
// every vector; on the H100 the kernel took as long when it read the logits
// once instead of twice, so latency, not bandwidth, held it back.
constexpr int kLoadsInFlight = 4;

// Adds the vector f of columns [i, i + V) (those below `real`) to st.
template <int V>
__device__ __forceinline__ void AccumulateVector(MaxSum& st, const float (&f)[V], int64_t i,
                                                 int64_t real) {
  if (i + V > real) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (i + k < real) Accumulate(st, f[k]);
    }
    return;
  }
  // A whole vector of real logits: rescale at most once per vector instead
  // of branching per element.
  float m = f[0];
#pragma unroll
  for (int k = 1; k < V; ++k) m = fmaxf(m, f[k]);
  bool nan = false;
#pragma unroll
  for (int k = 0; k < V; ++k) nan |= f[k] != f[k];
  if (nan) {
    st.s = NAN;  // NaN logits propagate to the loss
    return;
  }
  if (m == -INFINITY) return;  // adds nothing
  if (m > st.m) {
    st.s *= expf(st.m - m);  // 0 * exp(-inf) = 0 on the first vector
    st.m = m;
  }
  float add = 0.0f;
#pragma unroll
  for (int k = 0; k < V; ++k) add += expf(f[k] - st.m);
  st.s += add;
}

// Pass 1: (max, sum of exp(z - max)) over columns [0, real) of row z; every
// thread of the block gets the total. `warp_states` is shared memory for
// kThreads / 32 states. -inf and 0 when real == 0. A thread visits its
// vectors in column order, kInFlight loads ahead; the order, and so the
// result, is the same for any kInFlight.
template <typename T, int V, int kInFlight = kLoadsInFlight>
__device__ __forceinline__ MaxSum RowMaxSum(const T* __restrict__ z, int64_t real,
                                            MaxSum* warp_states) {
  MaxSum st{-INFINITY, 0.0f};
  const int64_t stride = int64_t(blockDim.x) * V;
  for (int64_t i0 = int64_t(threadIdx.x) * V; i0 < real; i0 += stride * kInFlight) {
    float f[kInFlight][V];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      // In bounds: rows hold a multiple of V columns when V > 1.
      if (i0 + u * stride < real) LoadF<V>(z + i0 + u * stride, f[u]);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      if (i0 + u * stride < real) AccumulateVector<V>(st, f[u], i0 + u * stride, real);
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
  return warp_states[0];
}

// Pass 2: the row's gradient scale * (exp(z - lse) - onehot(target_col)) on
// columns [0, real) and 0 on the padding, from the logits at src into dst
// (cols each; the same row in place, or a shared-memory copy of it).
template <typename T, int V, int kInFlight = kLoadsInFlight>
__device__ __forceinline__ void WriteRowGrad(T* dst, const T* src, int64_t cols, int64_t real,
                                             int64_t target_col, float lse, float scale) {
  const int64_t stride = int64_t(blockDim.x) * V;
  for (int64_t i0 = int64_t(threadIdx.x) * V; i0 < cols; i0 += stride * kInFlight) {
    float f[kInFlight][V];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      if (i0 + u * stride < cols) LoadF<V>(src + i0 + u * stride, f[u]);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int64_t i = i0 + u * stride;
      if (i >= cols) continue;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int64_t c = i + k;
        f[u][k] = c < real ? scale * (expf(f[u][k] - lse) - (c == target_col ? 1.0f : 0.0f)) : 0.0f;
      }
      StoreF<V>(dst + i, f[u]);
    }
  }
}

template <typename T, int V>
__device__ __forceinline__ void ZeroRow(T* __restrict__ z, int64_t cols) {
  const float zeros[V] = {};
  for (int64_t i = int64_t(threadIdx.x) * V; i < cols; i += int64_t(blockDim.x) * V) {
    StoreF<V>(z + i, zeros);
  }
}

// Ignored rows (target < 0) lose 0; targets >= vocab cannot be reported
// without a host sync, so their loss is NaN (the run visibly fails).
__device__ __forceinline__ bool SkippedRow(int32_t y, int64_t vocab) { return y < 0 || y >= vocab; }
__device__ __forceinline__ float SkippedLoss(int32_t y) { return y < 0 ? 0.0f : NAN; }

// kResident: the row is first copied to shared memory (dynamic, padded *
// sizeof(T) bytes; rows 16-byte aligned, padded a multiple of V) and both
// passes read the copy, one vector at a time (shared-memory loads are
// short): one read of the logits from memory instead of two, and the same
// visiting order, so the same bits.
template <typename T, int V, bool kResident>
__global__ void __launch_bounds__(kThreads)
    CrossEntropyKernel(float* __restrict__ losses, T* __restrict__ logits,
                       const int32_t* __restrict__ targets, int64_t vocab, int64_t padded,
                       float dloss_scale, bool compute_grad) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ MaxSum warp_states[kThreads / kWarpSize];
  const int64_t row = blockIdx.x;
  T* z = logits + row * padded;
  const int32_t y = targets[row];
  if (SkippedRow(y, vocab)) {  // uniform across the block
    if (threadIdx.x == 0) losses[row] = SkippedLoss(y);
    if (compute_grad) ZeroRow<T, V>(z, padded);
    return;
  }
  const T* src = z;  // where the passes read the row
  if constexpr (kResident) {
    T* const copy = reinterpret_cast<T*>(smem);
    for (int64_t i = int64_t(threadIdx.x) * V; i < padded; i += int64_t(blockDim.x) * V) {
      CpAsync16(copy + i, z + i);
    }
    CpAsyncCommit();
    CpAsyncWait<0>();
    __syncthreads();
    src = copy;
  }
  constexpr int kInFlight = kResident ? 1 : kLoadsInFlight;
  const MaxSum total = RowMaxSum<T, V, kInFlight>(src, vocab, warp_states);
  const float lse = total.m + logf(total.s);
  const float zy = ToF(src[y]);
  if (threadIdx.x == 0) losses[row] = lse - zy;
  if (!compute_grad) return;
  // In place, every thread must read z[y] before pass 2 may overwrite it.
  if constexpr (!kResident) __syncthreads();
  WriteRowGrad<T, V, kInFlight>(z, src, padded, vocab, y, lse, dloss_scale);
}

// Vocabulary-parallel pass 1 over this shard's columns: local max, sum of
// exp relative to it, and the target's logit if held here (else 0).
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    VocabStatsKernel(float* __restrict__ row_max, float* __restrict__ sum_exp,
                     float* __restrict__ target_logit, const T* __restrict__ logits,
                     const int32_t* __restrict__ targets, int64_t cols, int64_t real,
                     int64_t vocab_begin, int64_t vocab) {
  __shared__ MaxSum warp_states[kThreads / kWarpSize];
  const int64_t row = blockIdx.x;
  const T* z = logits + row * cols;
  const int32_t y = targets[row];
  if (SkippedRow(y, vocab)) {  // uniform across the block
    if (threadIdx.x == 0) {
      row_max[row] = -INFINITY;
      sum_exp[row] = 0.0f;
      target_logit[row] = 0.0f;
    }
    return;
  }
  const MaxSum total = RowMaxSum<T, V>(z, real, warp_states);
  if (threadIdx.x == 0) {
    row_max[row] = total.m;
    sum_exp[row] = total.s;
    const int64_t col = VocabLocalColumn(y, vocab_begin, real);
    target_logit[row] = col >= 0 ? ToF(z[col]) : 0.0f;
  }
}

// sum_exp was relative to the shard's max; make it relative to the global
// max. Exact (a factor of 1) when the shard holds the global max.
__global__ void VocabRescaleKernel(float* __restrict__ sum_exp, const float* __restrict__ row_max,
                                   const float* __restrict__ global_max, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float m = row_max[i];
    sum_exp[i] = m == -INFINITY ? 0.0f : sum_exp[i] * expf(m - global_max[i]);
  }
}

// The fused kernel's expressions: lse = max + log(sum); loss = lse - z[y].
__device__ __forceinline__ float RowLse(const float* global_max, const float* sum_exp,
                                        int64_t row) {
  return global_max[row] + logf(sum_exp[row]);
}

__global__ void VocabLossKernel(float* __restrict__ losses, const int32_t* __restrict__ targets,
                                const float* __restrict__ global_max,
                                const float* __restrict__ sum_exp,
                                const float* __restrict__ target_logit, int64_t n,
                                int64_t vocab) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int32_t y = targets[i];
    losses[i] = SkippedRow(y, vocab) ? SkippedLoss(y)
                                     : RowLse(global_max, sum_exp, i) - target_logit[i];
  }
}

template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    VocabGradKernel(float* __restrict__ losses, T* __restrict__ logits,
                    const int32_t* __restrict__ targets, const float* __restrict__ global_max,
                    const float* __restrict__ sum_exp, const float* __restrict__ target_logit,
                    int64_t cols, int64_t real, int64_t vocab_begin, int64_t vocab,
                    float dloss_scale) {
  const int64_t row = blockIdx.x;
  T* z = logits + row * cols;
  const int32_t y = targets[row];
  if (SkippedRow(y, vocab)) {  // uniform across the block
    if (threadIdx.x == 0) losses[row] = SkippedLoss(y);
    ZeroRow<T, V>(z, cols);
    return;
  }
  const float lse = RowLse(global_max, sum_exp, row);
  if (threadIdx.x == 0) losses[row] = lse - target_logit[row];
  WriteRowGrad<T, V>(z, z, cols, real, VocabLocalColumn(y, vocab_begin, real), lse, dloss_scale);
}

// One block per row: gridDim.x allows 2^31 - 1.
absl::Status CheckRows(int64_t rows) {
  if (rows < (int64_t{1} << 31)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "cross-entropy over 2^31 or more rows; expected fewer (one block per row). "
      "Hint: split the batch into micro-batches");
}

// Vector width for rows of `cols` columns at `p`: 16 bytes when every row
// starts aligned, else 1.
template <typename T>
bool Vectorized(const T* p, int64_t cols) {
  return cols % Packed128<T>::kSize == 0 && Aligned16(p);
}

// Shared memory the system keeps per resident block (1 KiB on sm_80 and
// sm_90), plus the kernel's static warp states, rounded up.
constexpr int64_t kSmemPerBlockOverhead = 2048;

// Whether the fused loss runs CrossEntropyKernel<..., kResident>: by default where
// two blocks' rows fit on an SM (so one block's copy overlaps the other's
// arithmetic); WEFT_CE_KERNEL=two-pass or =resident decides instead.
template <typename T>
absl::StatusOr<bool> UseResidentKernel(const T* logits, int64_t padded) {
  const char* env = std::getenv("WEFT_CE_KERNEL");
  const std::string forced = env == nullptr ? "" : env;
  if (!forced.empty() && forced != "two-pass" && forced != "resident") {
    return absl::InvalidArgumentError(absl::StrCat(
        "WEFT_CE_KERNEL=", forced,
        " names no cross-entropy kernel; expected two-pass or resident (unset it for the "
        "default)"));
  }
  if (forced == "two-pass") return false;
  const int64_t bytes = padded * int64_t(sizeof(T));
  WEFT_ASSIGN_OR_RETURN(const DeviceInfo device, CurrentDeviceInfo());
  const bool fits =
      Vectorized(logits, padded) && bytes + kSmemPerBlockOverhead <= device.smem_per_block_optin;
  if (forced == "resident" && !fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "WEFT_CE_KERNEL=resident, but a row of ", padded, " ", sizeof(T) == 2 ? "bf16" : "f32",
        " logits (", bytes, " bytes) does not fit the ", device.smem_per_block_optin,
        " bytes of shared memory a block may use, or its rows are not 16-byte aligned; "
        "expected at most ", (device.smem_per_block_optin - kSmemPerBlockOverhead) / int64_t(sizeof(T)),
        " aligned columns. Hint: unset WEFT_CE_KERNEL for the two-pass kernel"));
  }
  return fits &&
         (forced == "resident" || 2 * (bytes + kSmemPerBlockOverhead) <= device.smem_per_sm);
}

template <typename T>
absl::Status LaunchT(float* losses, T* logits, const int32_t* targets, int64_t rows,
                     int64_t vocab, int64_t padded, float dloss_scale, bool compute_grad,
                     cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  WEFT_RETURN_IF_ERROR(CheckRows(rows));
  const unsigned grid = static_cast<unsigned>(rows);
  WEFT_ASSIGN_OR_RETURN(const bool resident, UseResidentKernel(logits, padded));
  if (resident) {
    const size_t smem = static_cast<size_t>(padded) * sizeof(T);
    // Opt in to the most any resident row may use (UseResidentKernel's
    // bound), whatever this row's size: the kernel's static shared memory
    // counts against the default 48 KiB too, and every thread sets the
    // same value, so concurrent launches cannot lower it under each other.
    WEFT_ASSIGN_OR_RETURN(const DeviceInfo device, CurrentDeviceInfo());
    WEFT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        CrossEntropyKernel<T, V, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
        static_cast<int>(device.smem_per_block_optin - kSmemPerBlockOverhead)));
    CrossEntropyKernel<T, V, true><<<grid, kThreads, smem, stream>>>(
        losses, logits, targets, vocab, padded, dloss_scale, compute_grad);
  } else if (Vectorized(logits, padded)) {
    CrossEntropyKernel<T, V, false><<<grid, kThreads, 0, stream>>>(
        losses, logits, targets, vocab, padded, dloss_scale, compute_grad);
  } else {
    CrossEntropyKernel<T, 1, false><<<grid, kThreads, 0, stream>>>(
        losses, logits, targets, vocab, padded, dloss_scale, compute_grad);
  }
  return CheckLaunch("CrossEntropyKernel");
}

template <typename T>
absl::Status StatsT(const VocabShardArgs& a, const T* logits, float* row_max, float* sum_exp,
                    float* target_logit, cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  WEFT_RETURN_IF_ERROR(CheckRows(a.rows));
  const int64_t real = VocabRealColumns(a.vocab_begin, a.cols, a.vocab);
  const unsigned grid = static_cast<unsigned>(a.rows);
  if (Vectorized(logits, a.cols)) {
    VocabStatsKernel<T, V><<<grid, kThreads, 0, stream>>>(
        row_max, sum_exp, target_logit, logits, a.targets, a.cols, real, a.vocab_begin, a.vocab);
  } else {
    VocabStatsKernel<T, 1><<<grid, kThreads, 0, stream>>>(
        row_max, sum_exp, target_logit, logits, a.targets, a.cols, real, a.vocab_begin, a.vocab);
  }
  return CheckLaunch("VocabStatsKernel");
}

template <typename T>
absl::Status GradT(const VocabShardArgs& a, T* logits, float* losses, const float* global_max,
                   const float* sum_exp, const float* target_logit, float dloss_scale,
                   cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  WEFT_RETURN_IF_ERROR(CheckRows(a.rows));
  const int64_t real = VocabRealColumns(a.vocab_begin, a.cols, a.vocab);
  const unsigned grid = static_cast<unsigned>(a.rows);
  if (Vectorized(logits, a.cols)) {
    VocabGradKernel<T, V><<<grid, kThreads, 0, stream>>>(losses, logits, a.targets, global_max,
                                                         sum_exp, target_logit, a.cols, real,
                                                         a.vocab_begin, a.vocab, dloss_scale);
  } else {
    VocabGradKernel<T, 1><<<grid, kThreads, 0, stream>>>(losses, logits, a.targets, global_max,
                                                         sum_exp, target_logit, a.cols, real,
                                                         a.vocab_begin, a.vocab, dloss_scale);
  }
  return CheckLaunch("VocabGradKernel");
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

absl::Status LaunchVocabCrossEntropyStats(const VocabShardArgs& a, const void* logits,
                                          float* row_max, float* sum_exp, float* target_logit,
                                          cudaStream_t stream) {
  if (a.rows == 0) return absl::OkStatus();
  if (a.dtype == DType::kF32) {
    return StatsT(a, static_cast<const float*>(logits), row_max, sum_exp, target_logit, stream);
  }
  return StatsT(a, static_cast<const bf16*>(logits), row_max, sum_exp, target_logit, stream);
}

absl::Status LaunchVocabCrossEntropyRescale(float* sum_exp, const float* row_max,
                                            const float* global_max, int64_t rows,
                                            cudaStream_t stream) {
  if (rows == 0) return absl::OkStatus();
  VocabRescaleKernel<<<GridFor(rows, kRowThreads), kRowThreads, 0, stream>>>(sum_exp, row_max,
                                                                             global_max, rows);
  return CheckLaunch("VocabRescaleKernel");
}

absl::Status LaunchVocabCrossEntropyFinish(const VocabShardArgs& a, void* logits, float* losses,
                                           const float* global_max, const float* sum_exp,
                                           const float* target_logit, float dloss_scale,
                                           bool compute_grad, cudaStream_t stream) {
  if (a.rows == 0) return absl::OkStatus();
  if (!compute_grad) {
    VocabLossKernel<<<GridFor(a.rows, kRowThreads), kRowThreads, 0, stream>>>(
        losses, a.targets, global_max, sum_exp, target_logit, a.rows, a.vocab);
    return CheckLaunch("VocabLossKernel");
  }
  if (a.dtype == DType::kF32) {
    return GradT(a, static_cast<float*>(logits), losses, global_max, sum_exp, target_logit,
                 dloss_scale, stream);
  }
  return GradT(a, static_cast<bf16*>(logits), losses, global_max, sum_exp, target_logit,
               dloss_scale, stream);
}

}  // namespace weft::cuda
