// Layernorm and RMSNorm kernels. Forward: one warp per row, two passes over
// the row for mean and then variance (numerically safer than E[x^2] -
// E[x]^2); RMSNorm (kRms) is the same kernel with the mean fixed at 0 and no
// bias or dbias, so both share the row layouts and the reduction. Backward
// in one pass over dy and x: a warp per row writes dx and adds the row into
// its block's dweight/dbias partials in shared memory; a small finish
// (column_reduce.cuh) adds the blocks' partial rows in a fixed order. No
// atomics: bitwise-deterministic.
// Rows of up to 8 vectors a lane (2048 bf16 or 1024 f32 channels) stay in
// registers between the sweeps (kSteps > 0: every load of a row in flight at
// once, no rereads through L1 or L2); wider or unaligned rows are reread each
// sweep (kSteps == 0). Both visit the elements in one order with the same
// arithmetic, so they give the same bits; WEFT_LN_KERNEL=reread forces the
// second for comparison.
#include <cstdlib>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/status/statusor.h"
#include "core/kernels/cuda/column_reduce.cuh"
#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/layernorm.h"

namespace weft::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;

// Calls fn(j, i) for a lane's vectors of a row in order: step j covers
// channels [i, i + V) with i = (j * 32 + lane) * V. Unrolled over kSteps
// steps when kSteps > 0 (the row has at most kSteps * 32 * V channels).
template <int kSteps, int V, typename Fn>
__device__ __forceinline__ void ForLaneVectors(int lane, int channels, Fn&& fn) {
  if constexpr (kSteps > 0) {
#pragma unroll
    for (int j = 0; j < kSteps; ++j) {
      const int i = (j * kWarpSize + lane) * V;
      if (i < channels) fn(j, i);
    }
  } else {
    for (int j = 0, i = lane * V; i < channels; ++j, i += kWarpSize * V) fn(j, i);
  }
}

// A lane's vectors of one row, kept as loaded (packed T) when kSteps > 0;
// with kSteps == 0 it holds nothing and Get reads memory.
template <typename T, int V, int kSteps>
struct LaneRow {
  Packed128<T> v[kSteps > 0 ? kSteps : 1];

  // Issues the loads of every step of the row at p, all before any use.
  __device__ __forceinline__ void Load(const T* p, int lane, int channels) {
    if constexpr (kSteps > 0) {
      ForLaneVectors<kSteps, V>(lane, channels, [&](int j, int i) { v[j] = Load128(p + i); });
    }
  }
  // Step j's values rounded to T, as a reread of their stored copy gives.
  __device__ __forceinline__ void Keep(int j, const float (&f)[V]) {
    if constexpr (kSteps > 0) {
#pragma unroll
      for (int k = 0; k < V; ++k) v[j].v[k] = FromF<T>(f[k]);
    }
  }
  // Step j (at p + i in memory) as floats.
  __device__ __forceinline__ void Get(int j, const T* p, float (&f)[V]) const {
    if constexpr (kSteps > 0) {
#pragma unroll
      for (int k = 0; k < V; ++k) f[k] = ToF(v[j].v[k]);
    } else {
      LoadF<V>(p, f);
    }
  }
};

// kResidual: x is computed as a + b, stored to `res`, and read back from
// there (or kept, rounded, in registers). kRms: out = x * rstd * weight with
// rstd from mean(x^2); mean and bias are unused.
template <typename T, int V, bool kResidual, int kSteps, bool kRms>
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
  LaneRow<T, V, kSteps> xv;
  if constexpr (kResidual) {
    // Each lane rereads only what it wrote itself, so no barrier is needed.
    // a's and b's loads all go out before the first store.
    xr = res + base;
    LaneRow<T, V, kSteps> av, bv;
    av.Load(a + base, lane, channels);
    bv.Load(b + base, lane, channels);
    ForLaneVectors<kSteps, V>(lane, channels, [&](int j, int i) {
      float fa[V], fb[V], fr[V];
      av.Get(j, a + base + i, fa);
      bv.Get(j, b + base + i, fb);
#pragma unroll
      for (int k = 0; k < V; ++k) fr[k] = fa[k] + fb[k];
      StoreF<V>(res + base + i, fr);
      xv.Keep(j, fr);
    });
  } else {
    xv.Load(xr, lane, channels);
  }
  float m = 0.0f;
  if constexpr (!kRms) {
    float sum = 0.0f;
    ForLaneVectors<kSteps, V>(lane, channels, [&](int j, int i) {
      float f[V];
      xv.Get(j, xr + i, f);
#pragma unroll
      for (int k = 0; k < V; ++k) sum += f[k];
    });
    m = WarpSum(sum) / channels;
  }
  float sq = 0.0f;
  ForLaneVectors<kSteps, V>(lane, channels, [&](int j, int i) {
    float f[V];
    xv.Get(j, xr + i, f);
#pragma unroll
    for (int k = 0; k < V; ++k) sq += (f[k] - m) * (f[k] - m);
  });
  const float rs = 1.0f / sqrtf(WarpSum(sq) / channels + eps);
  if (lane == 0) {
    if constexpr (!kRms) mean[row] = m;
    rstd[row] = rs;
  }
  ForLaneVectors<kSteps, V>(lane, channels, [&](int j, int i) {
    float f[V], w[V], bb[V] = {};
    xv.Get(j, xr + i, f);
    LoadF<V>(weight + i, w);
    if constexpr (kRms) {
#pragma unroll
      for (int k = 0; k < V; ++k) f[k] = f[k] * rs * w[k];
    } else {
      if (bias != nullptr) LoadF<V>(bias + i, bb);
#pragma unroll
      for (int k = 0; k < V; ++k) f[k] = (f[k] - m) * rs * w[k] + bb[k];
    }
    StoreF<V>(out + base + i, f);
  });
}

// One-pass backward. A block of `warps` warps owns rows [r0, r0 +
// rows_per_block); warp w takes rows r0 + w, r0 + w + warps, ... For each row
// the first sweep loads dy and x from memory once: it forms the two row sums
// dx needs and adds dy*xhat and dy into the warp's own shared-memory
// partials; the second sweep rereads the row (kept in registers, or from L1)
// to write
//   dx = residual + rstd * (dy*w - mean(dy*w) - xhat * mean(dy*w*xhat)).
// Then the block adds its warps' partials in warp order and writes one
// partial row per sum: partials[blockIdx.x] (dweight) and
// partials[gridDim.x + blockIdx.x] (dbias), for ColumnFinalizeKernel.
// kRms (RMSNorm): mean 0 and no dbias, so dx = residual + rstd * (dy*w -
// xhat * mean(dy*w*xhat)) and one sum (kSums) per warp and block.
// Shared memory per warp: [kSums][slice] floats; element k of a lane's V at
// sweep step j sits at slot (j*V + k)*32 + lane, so a warp's 32 accesses
// hit 32 banks. A slot belongs to one lane, so no barrier until the end.
// dx may alias dy or residual: a lane reads its elements of a row before it
// writes them, and never touches another lane's.
// The backward's block size limit; see BackwardShapeFor.
constexpr int kBwdMaxWarps = 8;

// __launch_bounds__: 4 blocks of 8 warps an SM (what shared memory allows at
// C = 768), so at most 64 registers a thread with rows kept in registers.
template <typename T, int V, int kSteps, bool kRms>
__global__ void __launch_bounds__(kBwdMaxWarps * kWarpSize, 4) LayerNormBackwardKernel(T* dx, float* __restrict__ partials, const T* dy,
                                        const T* residual, const T* __restrict__ x,
                                        const T* __restrict__ weight,
                                        const float* __restrict__ mean,
                                        const float* __restrict__ rstd, int64_t rows,
                                        int channels, int rows_per_block, int slice) {
  constexpr int kSums = kRms ? 1 : 2;
  extern __shared__ __align__(16) unsigned char smem[];
  float* const acc = reinterpret_cast<float*>(smem);
  const int warps = blockDim.x / kWarpSize;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  float* const acc_w = acc + int64_t(warp) * kSums * slice;
  float* const acc_b = acc_w + slice;  // LayerNorm only
  for (int i = lane; i < kSums * slice; i += kWarpSize) acc_w[i] = 0.0f;
  const int64_t r0 = int64_t(blockIdx.x) * rows_per_block;
  const int64_t r1 = min(rows, r0 + rows_per_block);
  for (int64_t row = r0 + warp; row < r1; row += warps) {
    const int64_t base = row * channels;
    const float m = kRms ? 0.0f : mean[row], rs = rstd[row];
    LaneRow<T, V, kSteps> gv, xv;
    gv.Load(dy + base, lane, channels);
    xv.Load(x + base, lane, channels);
    float s1 = 0.0f, s2 = 0.0f;
    ForLaneVectors<kSteps, V>(lane, channels, [&](int j, int i) {
      float g[V], f[V], w[V];
      gv.Get(j, dy + base + i, g);
      xv.Get(j, x + base + i, f);
      LoadF<V>(weight + i, w);  // the same for every row: from L1
      const int slot = j * kWarpSize * V + lane;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float xhat = (f[k] - m) * rs;
        const float dyw = g[k] * w[k];
        if constexpr (!kRms) s1 += dyw;
        s2 += dyw * xhat;
        acc_w[slot + k * kWarpSize] += g[k] * xhat;
        if constexpr (!kRms) acc_b[slot + k * kWarpSize] += g[k];
      }
    });
    if constexpr (!kRms) s1 = WarpSum(s1) / channels;
    s2 = WarpSum(s2) / channels;
    ForLaneVectors<kSteps, V>(lane, channels, [&](int j, int i) {
      float g[V], f[V], w[V], old[V] = {};
      gv.Get(j, dy + base + i, g);
      xv.Get(j, x + base + i, f);
      LoadF<V>(weight + i, w);  // the same for every row: from L1
      if (residual != nullptr) LoadF<V>(residual + base + i, old);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float xhat = (f[k] - m) * rs;
        g[k] = old[k] + (g[k] * w[k] - s1 - xhat * s2) * rs;
      }
      StoreF<V>(dx + base + i, g);
    });
  }
  // Warps' partials, added in warp order into warp 0's slices: by slot, so
  // consecutive threads read consecutive banks.
  __syncthreads();
  for (int i = threadIdx.x; i < kSums * slice; i += blockDim.x) {
    float t = acc[i];
    for (int w = 1; w < warps; ++w) t += acc[int64_t(w) * kSums * slice + i];
    acc[i] = t;
  }
  __syncthreads();
  // Then by column, so the global writes are coalesced.
  float* const out_w = partials + int64_t(blockIdx.x) * channels;
  float* const out_b = partials + int64_t(gridDim.x + blockIdx.x) * channels;
  for (int c = threadIdx.x; c < channels; c += blockDim.x) {
    const int step = c / (kWarpSize * V), in_step = c % (kWarpSize * V);
    const int slot = (step * V + in_step % V) * kWarpSize + in_step / V;
    out_w[c] = acc[slot];
    if constexpr (!kRms) out_b[c] = acc[slice + slot];
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

// The register-resident step counts compiled (kSteps of the kernels). The
// backward stops at 4 (C <= 1024 bf16, 512 f32): past that its 64 registers
// spill hundreds of bytes a thread, so wider rows are reread.
constexpr int kResidentSteps[] = {1, 2, 3, 4, 6, 8};
constexpr int kForwardMaxSteps = 8;
constexpr int kBackwardMaxSteps = 4;

// kSteps for rows of `channels` read V at a time: the fewest compiled steps
// (at most max_steps) covering the row, or 0 (reread each sweep) for a
// scalar row (V == 1), a wider row, or WEFT_LN_KERNEL=reread.
// WEFT_LN_KERNEL=resident insists on registers and fails where they cannot
// hold the row.
absl::StatusOr<int> StepsFor(int64_t channels, int V, int max_steps) {
  const char* env = std::getenv("WEFT_LN_KERNEL");
  const std::string_view forced = env == nullptr ? "" : env;
  if (!forced.empty() && forced != "reread" && forced != "resident") {
    return absl::InvalidArgumentError(
        "WEFT_LN_KERNEL=" + std::string(forced) +
        " names no layernorm kernel; expected reread or resident (unset it for the default)");
  }
  if (forced == "reread") return 0;
  const int64_t steps = CeilDiv(channels, int64_t(kWarpSize) * V);
  if (V > 1) {
    for (int s : kResidentSteps) {
      if (s <= max_steps && steps <= s) return s;
    }
  }
  if (forced == "resident") {
    return absl::InvalidArgumentError(
        "WEFT_LN_KERNEL=resident, but a row of " + std::to_string(channels) +
        " channels does not fit a warp's registers in the " +
        (max_steps == kForwardMaxSteps ? "forward" : "backward") + " (expected rows of at most " +
        std::to_string(max_steps * kWarpSize) + " 16-byte vectors, " +
        std::to_string(max_steps * kWarpSize * 8) + " bf16 or " +
        std::to_string(max_steps * kWarpSize * 4) +
        " f32 channels, 16-byte aligned). Hint: unset WEFT_LN_KERNEL");
  }
  return 0;
}

// fn(std::integral_constant<int, kSteps>) for a step count from StepsFor
// with max_steps = kMaxSteps (only those kernels are compiled).
template <int kMaxSteps, typename Fn>
absl::Status WithSteps(int steps, Fn&& fn) {
  switch (steps) {
    case 1: return fn(std::integral_constant<int, 1>());
    case 2: return fn(std::integral_constant<int, 2>());
    case 3: return fn(std::integral_constant<int, 3>());
    case 4: return fn(std::integral_constant<int, 4>());
    case 6:
      if constexpr (kMaxSteps >= 6) return fn(std::integral_constant<int, 6>());
      break;
    case 8:
      if constexpr (kMaxSteps >= 8) return fn(std::integral_constant<int, 8>());
      break;
    default: break;
  }
  return fn(std::integral_constant<int, 0>());
}

template <typename T, bool kResidual, bool kRms = false>
absl::Status ForwardT(T* out, float* mean, float* rstd, const T* x, T* res, const T* a,
                      const T* b, const T* weight, const T* bias, int64_t rows, int channels,
                      float eps, cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  const unsigned grid = static_cast<unsigned>(CeilDiv(rows, kWarpsPerBlock));
  if (VectorWidth<T>(channels, {out, x, res, a, b, weight, bias}) == V) {
    WEFT_ASSIGN_OR_RETURN(const int steps, StepsFor(channels, V, kForwardMaxSteps));
    return WithSteps<kForwardMaxSteps>(steps, [&](auto k) {
      LayerNormForwardKernel<T, V, kResidual, decltype(k)::value, kRms><<<grid, kThreads, 0, stream>>>(
          out, mean, rstd, x, res, a, b, weight, bias, rows, channels, eps);
      return CheckLaunch("LayerNormForwardKernel");
    });
  }
  // A forced `resident` fails here.
  WEFT_RETURN_IF_ERROR(StepsFor(channels, 1, kForwardMaxSteps).status());
  LayerNormForwardKernel<T, 1, kResidual, 0, kRms><<<grid, kThreads, 0, stream>>>(
      out, mean, rstd, x, res, a, b, weight, bias, rows, channels, eps);
  return CheckLaunch("LayerNormForwardKernel");
}

// Launch shape of the backward, a function of (rows, channels, sums) only
// (never of the GPU or of pointer alignment), so a shape always sums in one
// order. Warps per block: as many of 8 as fit kBwdSmemBytes of per-warp
// partials (`sums` rows of them, 2 for LayerNorm, 1 for RMSNorm; sized for
// the widest vector, 8 columns per lane). Rows per block: at
// least 2 per warp, and few enough blocks (<= 512) that the partial rows
// (2 x blocks x C floats, read once by the finish) stay small beside dy and x.
constexpr int64_t kBwdSmemBytes = 96 * 1024;  // > 48 KiB: opt-in, sm_70 and newer
constexpr int kBwdMinRowsPerWarp = 2;
constexpr int64_t kBwdMaxBlocks = 512;

int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }
int64_t BwdSliceBytes(int64_t channels, int sums) {
  return sums * RoundUp(channels, kWarpSize * 8) * 4;
}

struct BackwardShape {
  int warps;
  int rows_per_block;
  int blocks;
};

BackwardShape BackwardShapeFor(int64_t rows, int64_t channels, int sums) {
  const int warps = static_cast<int>(
      std::clamp<int64_t>(kBwdSmemBytes / BwdSliceBytes(channels, sums), 1, kBwdMaxWarps));
  const int64_t per_block = std::max<int64_t>(kBwdMinRowsPerWarp * warps,
                                              RoundUp(CeilDiv(rows, kBwdMaxBlocks), warps));
  return {warps, static_cast<int>(per_block), static_cast<int>(CeilDiv(rows, per_block))};
}

template <typename T, int V, bool kRms>
absl::Status LaunchBackwardKernel(T* dx, float* partials, const T* dy, const T* residual,
                                  const T* x, const T* weight, const float* mean,
                                  const float* rstd, int64_t rows, int channels,
                                  const BackwardShape& shape, cudaStream_t stream) {
  const int slice = static_cast<int>(RoundUp(channels, kWarpSize * V));
  const size_t smem = size_t(shape.warps) * (kRms ? 1 : 2) * slice * sizeof(float);
  WEFT_ASSIGN_OR_RETURN(const int steps, StepsFor(channels, V, kBackwardMaxSteps));
  return WithSteps<kBackwardMaxSteps>(V > 1 ? steps : 0, [&](auto k) {
    // Scalar rows (V == 1) are never kept in registers: compile kSteps 0 only.
    constexpr int kSteps = V > 1 ? decltype(k)::value : 0;
    auto* const kernel = LayerNormBackwardKernel<T, V, kSteps, kRms>;
    if (smem > 48 * 1024) {
      // Past the default limit: opt in to the most any shape uses (not this
      // launch's size), so concurrent launchers never lower it under another.
      WEFT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBwdSmemBytes)));
    }
    kernel<<<shape.blocks, shape.warps * kWarpSize, smem, stream>>>(
        dx, partials, dy, residual, x, weight, mean, rstd, rows, channels, shape.rows_per_block,
        slice);
    return CheckLaunch("LayerNormBackwardKernel");
  });
}

// kRms: mean and dbias are null (RMSNorm has neither).
template <bool kRms, typename T>
absl::Status BackwardT(T* dx, void* dweight, void* dbias, DType grad_dtype, const T* dy,
                       const T* residual, const T* x, const T* weight, const float* mean,
                       const float* rstd, int64_t rows, int channels, float* scratch,
                       cudaStream_t stream) {
  const BackwardShape shape = BackwardShapeFor(rows, channels, kRms ? 1 : 2);
  if (VectorWidth<T>(channels, {dx, dy, residual, x, weight}) == Packed128<T>::kSize) {
    WEFT_RETURN_IF_ERROR((LaunchBackwardKernel<T, Packed128<T>::kSize, kRms>(
        dx, scratch, dy, residual, x, weight, mean, rstd, rows, channels, shape, stream)));
  } else {
    WEFT_RETURN_IF_ERROR((LaunchBackwardKernel<T, 1, kRms>(dx, scratch, dy, residual, x, weight,
                                                           mean, rstd, rows, channels, shape,
                                                           stream)));
  }
  // Without a bias only dweight's half of the partials is summed.
  if (grad_dtype == DType::kF32) {
    return LaunchColumnFinalize<float>(static_cast<float*>(dweight), static_cast<float*>(dbias),
                                       scratch, shape.blocks, channels, stream);
  }
  return LaunchColumnFinalize<bf16>(static_cast<bf16*>(dweight), static_cast<bf16*>(dbias),
                                    scratch, shape.blocks, channels, stream);
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
  return 2 * int64_t(BackwardShapeFor(rows, channels, 2).blocks) * channels;
}

int64_t LayerNormBackwardMaxChannels() {
  // One warp per block, its two slices rounded up to 256 columns.
  return kBwdSmemBytes / (2 * sizeof(float)) / (kWarpSize * 8) * (kWarpSize * 8);
}

absl::Status LaunchLayerNormBackward(void* dx, void* dweight, void* dbias, DType grad_dtype,
                                     const void* dy, const void* residual, const void* x,
                                     const void* weight, const float* mean, const float* rstd,
                                     DType dtype, int64_t rows, int64_t channels, float* scratch,
                                     cudaStream_t stream) {
  if (rows == 0 || channels == 0) return absl::OkStatus();
  if (channels > LayerNormBackwardMaxChannels()) {
    return absl::InvalidArgumentError(
        "layernorm backward on CUDA supports at most " +
        std::to_string(LayerNormBackwardMaxChannels()) + " channels, got " +
        std::to_string(channels) +
        " (one warp's dweight/dbias partials must fit in shared memory)");
  }
  const int c = static_cast<int>(channels);
  if (dtype == DType::kF32) {
    return BackwardT<false>(static_cast<float*>(dx), dweight, dbias, grad_dtype,
                            static_cast<const float*>(dy), static_cast<const float*>(residual),
                            static_cast<const float*>(x), static_cast<const float*>(weight),
                            mean, rstd, rows, c, scratch, stream);
  }
  return BackwardT<false>(static_cast<bf16*>(dx), dweight, dbias, grad_dtype,
                          static_cast<const bf16*>(dy), static_cast<const bf16*>(residual),
                          static_cast<const bf16*>(x), static_cast<const bf16*>(weight), mean,
                          rstd, rows, c, scratch, stream);
}

absl::Status LaunchRmsNormForward(void* residual_out, void* out, float* rstd, const void* a,
                                  const void* b, const void* weight, DType dtype, int64_t rows,
                                  int64_t channels, float eps, cudaStream_t stream) {
  if (rows == 0) return absl::OkStatus();
  const int c = static_cast<int>(channels);
  if (dtype == DType::kF32) {
    const auto* w = static_cast<const float*>(weight);
    if (b == nullptr) {
      return ForwardT<float, false, true>(static_cast<float*>(out), nullptr, rstd,
                                          static_cast<const float*>(a), nullptr, nullptr,
                                          nullptr, w, nullptr, rows, c, eps, stream);
    }
    return ForwardT<float, true, true>(static_cast<float*>(out), nullptr, rstd, nullptr,
                                       static_cast<float*>(residual_out),
                                       static_cast<const float*>(a), static_cast<const float*>(b),
                                       w, nullptr, rows, c, eps, stream);
  }
  const auto* w = static_cast<const bf16*>(weight);
  if (b == nullptr) {
    return ForwardT<bf16, false, true>(static_cast<bf16*>(out), nullptr, rstd,
                                       static_cast<const bf16*>(a), nullptr, nullptr, nullptr, w,
                                       nullptr, rows, c, eps, stream);
  }
  return ForwardT<bf16, true, true>(static_cast<bf16*>(out), nullptr, rstd, nullptr,
                                    static_cast<bf16*>(residual_out), static_cast<const bf16*>(a),
                                    static_cast<const bf16*>(b), w, nullptr, rows, c, eps, stream);
}

int64_t RmsNormBackwardScratchFloats(int64_t rows, int64_t channels) {
  return int64_t(BackwardShapeFor(rows, channels, 1).blocks) * channels;
}

int64_t RmsNormBackwardMaxChannels() {
  // One warp per block, its one slice rounded up to 256 columns.
  return kBwdSmemBytes / sizeof(float) / (kWarpSize * 8) * (kWarpSize * 8);
}

absl::Status LaunchRmsNormBackward(void* dx, void* dweight, DType grad_dtype, const void* dy,
                                   const void* residual, const void* x, const void* weight,
                                   const float* rstd, DType dtype, int64_t rows,
                                   int64_t channels, float* scratch, cudaStream_t stream) {
  if (rows == 0 || channels == 0) return absl::OkStatus();
  if (channels > RmsNormBackwardMaxChannels()) {
    return absl::InvalidArgumentError(
        "rmsnorm backward on CUDA supports at most " +
        std::to_string(RmsNormBackwardMaxChannels()) + " channels, got " +
        std::to_string(channels) + " (one warp's dweight partials must fit in shared memory)");
  }
  const int c = static_cast<int>(channels);
  if (dtype == DType::kF32) {
    return BackwardT<true>(static_cast<float*>(dx), dweight, nullptr, grad_dtype,
                           static_cast<const float*>(dy), static_cast<const float*>(residual),
                           static_cast<const float*>(x), static_cast<const float*>(weight),
                           nullptr, rstd, rows, c, scratch, stream);
  }
  return BackwardT<true>(static_cast<bf16*>(dx), dweight, nullptr, grad_dtype,
                         static_cast<const bf16*>(dy), static_cast<const bf16*>(residual),
                         static_cast<const bf16*>(x), static_cast<const bf16*>(weight), nullptr,
                         rstd, rows, c, scratch, stream);
}

}  // namespace weft::cuda
