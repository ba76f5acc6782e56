// Attention entry points (attention.h) and the simple kernels behind the f32
// path and the fallback for shapes the flash kernels do not take.
//
// Simple kernels: one warp per (batch, head, row). A lane holds head
// dimensions lane, lane+32, ... in registers; each score is a warp-reduced
// dot product, and the softmax is online (forward) or recomputed from lse
// (backward), so no T x T matrix exists. Backward is split like the flash
// version: one kernel owns a query row (dQ), another a key row (dK, dV), and
// each output is written exactly once. O(T^2 * HS) work per head with no
// data reuse: fine for f32 tests and small models, not for GPT-2 speed.
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/kernels/cuda/attention.h"
#include "core/kernels/cuda/attention_internal.h"
#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/device_info.h"

namespace weft::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;
constexpr int kPerLane = kMaxAttentionHeadSize / kWarpSize;

struct RowIndex {
  int64_t b, h, i, bh;
};

// Rows are ordered (b, h, i) with i fastest; false past the last row.
__device__ __forceinline__ bool WarpRow(int64_t rows, int T, int NH, RowIndex& r) {
  const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return false;
  r.i = row % T;
  r.bh = row / T;
  r.h = r.bh % NH;
  r.b = r.bh / NH;
  return true;
}

template <typename E>
__device__ __forceinline__ void LoadHead(float (&v)[kPerLane], const E* p, int hs) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int d = lane + r * kWarpSize;
    v[r] = d < hs ? ToF(p[d]) : 0.0f;
  }
}

template <typename E>
__device__ __forceinline__ void StoreHead(E* p, const float (&v)[kPerLane], int hs, float scale) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int d = lane + r * kWarpSize;
    if (d < hs) p[d] = FromF<E>(v[r] * scale);
  }
}

// Warp-wide dot product; every lane gets the same bits (xor butterfly).
template <typename E>
__device__ __forceinline__ float Dot(const float (&x)[kPerLane], const E* y, int hs) {
  const int lane = threadIdx.x % kWarpSize;
  float acc = 0.0f;
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int d = lane + r * kWarpSize;
    if (d < hs) acc += x[r] * ToF(y[d]);
  }
  return WarpSum(acc);
}

template <typename E>
__global__ void SimpleForwardKernel(E* __restrict__ out, float* __restrict__ lse,
                                    const E* __restrict__ qkv, int64_t rows, int T, int NH,
                                    int hs, float scale) {
  RowIndex r;
  if (!WarpRow(rows, T, NH, r)) return;
  const int C = NH * hs;
  const int64_t ld = 3 * int64_t(C);
  const E* base = qkv + r.b * T * ld + r.h * hs;
  float q[kPerLane], o[kPerLane] = {};
  LoadHead(q, base + r.i * ld, hs);
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = 0; j <= r.i; ++j) {
    const float s = Dot(q, base + j * ld + C, hs) * scale;
    const float mn = fmaxf(m, s);
    const float alpha = expf(m - mn);  // 0 for the first key
    const float p = expf(s - mn);
    l = l * alpha + p;
    const E* v = base + j * ld + 2 * C;
    const int lane = threadIdx.x % kWarpSize;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + k * kWarpSize;
      if (d < hs) o[k] = o[k] * alpha + p * ToF(v[d]);
    }
    m = mn;
  }
  StoreHead(out + (r.b * T + r.i) * C + r.h * hs, o, hs, 1.0f / l);
  if (threadIdx.x % kWarpSize == 0) lse[r.bh * T + r.i] = m + logf(l);
}

// dQ for one query row i: sum over keys j <= i of dS_ij * K_j.
template <typename E>
__global__ void SimpleBackwardQKernel(E* __restrict__ dqkv, const E* __restrict__ dout,
                                      const E* __restrict__ qkv, const float* __restrict__ lse,
                                      const float* __restrict__ dsum, int64_t rows, int T,
                                      int NH, int hs, float scale) {
  RowIndex r;
  if (!WarpRow(rows, T, NH, r)) return;
  const int C = NH * hs;
  const int64_t ld = 3 * int64_t(C);
  const E* base = qkv + r.b * T * ld + r.h * hs;
  float q[kPerLane], go[kPerLane], dq[kPerLane] = {};
  LoadHead(q, base + r.i * ld, hs);
  LoadHead(go, dout + (r.b * T + r.i) * C + r.h * hs, hs);
  const float row_lse = lse[r.bh * T + r.i], row_d = dsum[r.bh * T + r.i];
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t j = 0; j <= r.i; ++j) {
    const E* k = base + j * ld + C;
    const float p = expf(Dot(q, k, hs) * scale - row_lse);
    const float ds = p * (Dot(go, k + C, hs) - row_d) * scale;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int d = lane + e * kWarpSize;
      if (d < hs) dq[e] += ds * ToF(k[d]);
    }
  }
  StoreHead(dqkv + (r.b * T + r.i) * ld + r.h * hs, dq, hs, 1.0f);
}

// dK, dV for one key row j: sums over queries i >= j.
template <typename E>
__global__ void SimpleBackwardKVKernel(E* __restrict__ dqkv, const E* __restrict__ dout,
                                       const E* __restrict__ qkv, const float* __restrict__ lse,
                                       const float* __restrict__ dsum, int64_t rows, int T,
                                       int NH, int hs, float scale) {
  RowIndex r;  // r.i is the key row
  if (!WarpRow(rows, T, NH, r)) return;
  const int C = NH * hs;
  const int64_t ld = 3 * int64_t(C);
  const E* base = qkv + r.b * T * ld + r.h * hs;
  float k[kPerLane], v[kPerLane], dk[kPerLane] = {}, dv[kPerLane] = {};
  LoadHead(k, base + r.i * ld + C, hs);
  LoadHead(v, base + r.i * ld + 2 * C, hs);
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t i = r.i; i < T; ++i) {
    const E* q = base + i * ld;
    const E* go = dout + (r.b * T + i) * C + r.h * hs;
    const float p = expf(Dot(k, q, hs) * scale - lse[r.bh * T + i]);
    const float ds = p * (Dot(v, go, hs) - dsum[r.bh * T + i]) * scale;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int d = lane + e * kWarpSize;
      if (d < hs) {
        dk[e] += ds * ToF(q[d]);
        dv[e] += p * ToF(go[d]);
      }
    }
  }
  E* row = dqkv + (r.b * T + r.i) * ld + r.h * hs;
  StoreHead(row + C, dk, hs, 1.0f);
  StoreHead(row + 2 * C, dv, hs, 1.0f);
}

template <typename E>
__global__ void RowDotKernel(float* __restrict__ dsum, const E* __restrict__ dout,
                             const E* __restrict__ out, int64_t rows, int T, int NH, int hs) {
  RowIndex r;
  if (!WarpRow(rows, T, NH, r)) return;
  const int64_t off = (r.b * T + r.i) * NH * hs + r.h * hs;
  float acc = 0.0f;
  for (int d = threadIdx.x % kWarpSize; d < hs; d += kWarpSize) {
    acc += ToF(dout[off + d]) * ToF(out[off + d]);
  }
  acc = WarpSum(acc);
  if (threadIdx.x % kWarpSize == 0) dsum[r.bh * T + r.i] = acc;
}

// The bf16 row dot with 8 lanes per row and 16-byte loads (a warp covers
// four rows); used when the head size is a multiple of 8 and rows are
// 16-byte aligned. The one-warp-per-row kernel above read two bytes a lane.
constexpr int kRowDotLanes = 8;

__global__ void RowDotVecKernel(float* __restrict__ dsum, const bf16* __restrict__ dout,
                                const bf16* __restrict__ out, int64_t rows, int T, int NH,
                                int hs) {
  const int64_t q = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kRowDotLanes;
  const int sub = threadIdx.x % kRowDotLanes;
  const bool live = q < rows;  // no early exit: the whole warp shuffles below
  const int64_t bh = q / T;
  const int i = static_cast<int>(q % T);
  const int64_t b = bh / NH, h = bh % NH;
  const int64_t off = (b * T + i) * NH * hs + h * hs;
  float acc = 0.0f;
  for (int d = sub * 8; live && d < hs; d += kRowDotLanes * 8) {
    float g[8], o[8];
    LoadF<8>(dout + off + d, g);
    LoadF<8>(out + off + d, o);
#pragma unroll
    for (int k = 0; k < 8; ++k) acc += g[k] * o[k];
  }
  // xor 4, 2, 1 stays inside each aligned group of 8 lanes.
  acc += __shfl_xor_sync(0xffffffffu, acc, 4);
  acc += __shfl_xor_sync(0xffffffffu, acc, 2);
  acc += __shfl_xor_sync(0xffffffffu, acc, 1);
  if (live && sub == 0) dsum[bh * T + i] = acc;
}

unsigned Blocks(const AttentionDims& d) {
  return static_cast<unsigned>(CeilDiv(d.b * d.nh * d.t, kWarpsPerBlock));
}

template <typename E>
absl::Status SimpleForwardT(E* out, float* lse, const E* qkv, const AttentionDims& d,
                            cudaStream_t stream) {
  const float scale = 1.0f / sqrtf(static_cast<float>(d.hs));
  SimpleForwardKernel<E><<<Blocks(d), kThreads, 0, stream>>>(
      out, lse, qkv, d.b * d.nh * d.t, static_cast<int>(d.t), static_cast<int>(d.nh),
      static_cast<int>(d.hs), scale);
  return CheckLaunch("SimpleForwardKernel");
}

template <typename E>
absl::Status SimpleBackwardT(E* dqkv, const E* dout, const E* qkv, const float* lse,
                             const float* dsum, const AttentionDims& d, cudaStream_t stream) {
  const float scale = 1.0f / sqrtf(static_cast<float>(d.hs));
  const int64_t rows = d.b * d.nh * d.t;
  const int T = static_cast<int>(d.t), NH = static_cast<int>(d.nh), hs = static_cast<int>(d.hs);
  SimpleBackwardQKernel<E><<<Blocks(d), kThreads, 0, stream>>>(dqkv, dout, qkv, lse, dsum, rows,
                                                               T, NH, hs, scale);
  WEFT_RETURN_IF_ERROR(CheckLaunch("SimpleBackwardQKernel"));
  SimpleBackwardKVKernel<E><<<Blocks(d), kThreads, 0, stream>>>(dqkv, dout, qkv, lse, dsum, rows,
                                                                T, NH, hs, scale);
  return CheckLaunch("SimpleBackwardKVKernel");
}

}  // namespace

absl::Status LaunchSimpleForward(void* out, float* lse, const void* qkv, DType dtype,
                                 const AttentionDims& d, cudaStream_t stream) {
  if (dtype == DType::kF32) {
    return SimpleForwardT(static_cast<float*>(out), lse, static_cast<const float*>(qkv), d,
                          stream);
  }
  return SimpleForwardT(static_cast<bf16*>(out), lse, static_cast<const bf16*>(qkv), d, stream);
}

absl::Status LaunchSimpleBackward(void* dqkv, const void* dout, const void* qkv,
                                  const float* lse, const float* dsum, DType dtype,
                                  const AttentionDims& d, cudaStream_t stream) {
  if (dtype == DType::kF32) {
    return SimpleBackwardT(static_cast<float*>(dqkv), static_cast<const float*>(dout),
                           static_cast<const float*>(qkv), lse, dsum, d, stream);
  }
  return SimpleBackwardT(static_cast<bf16*>(dqkv), static_cast<const bf16*>(dout),
                         static_cast<const bf16*>(qkv), lse, dsum, d, stream);
}

absl::Status LaunchAttentionRowDot(float* dsum, const void* dout, const void* out, DType dtype,
                                   const AttentionDims& d, cudaStream_t stream) {
  const int64_t rows = d.b * d.nh * d.t;
  const int T = static_cast<int>(d.t), NH = static_cast<int>(d.nh), hs = static_cast<int>(d.hs);
  if (dtype == DType::kF32) {
    RowDotKernel<float><<<Blocks(d), kThreads, 0, stream>>>(
        dsum, static_cast<const float*>(dout), static_cast<const float*>(out), rows, T, NH, hs);
  } else if (hs % 8 == 0 && (int64_t(NH) * hs) % 8 == 0 && Aligned16(dout) && Aligned16(out)) {
    const unsigned blocks = static_cast<unsigned>(CeilDiv(rows * kRowDotLanes, kThreads));
    RowDotVecKernel<<<blocks, kThreads, 0, stream>>>(
        dsum, static_cast<const bf16*>(dout), static_cast<const bf16*>(out), rows, T, NH, hs);
  } else {
    RowDotKernel<bf16><<<Blocks(d), kThreads, 0, stream>>>(
        dsum, static_cast<const bf16*>(dout), static_cast<const bf16*>(out), rows, T, NH, hs);
  }
  return CheckLaunch("RowDotKernel");
}

bool FlashAttentionApplies(DType dtype, int64_t head_size,
                           std::initializer_list<const void*> ptrs) {
  if (dtype != DType::kBF16) return false;
  if (head_size != 32 && head_size != 64 && head_size != 128) return false;
  for (const void* p : ptrs) {
    if (!Aligned16(p)) return false;
  }
  return true;
}

std::string FlashTilingName(FlashTiling t) {
  if (t.fused_dq) return "fused-dq";
  if (t.wgmma) {
    return absl::StrCat("wgmma-", t.rows(), t.n_major ? "-nmajor" : "", t.pipelined ? "-pipe" : "",
                        t.key_tile != 64 ? absl::StrCat("-k", t.key_tile) : "");
  }
  return absl::StrCat(t.warps, "x", t.rows_per_warp);
}

namespace {

// The tiling among `choices` named by environment variable `var`, or
// `fallback` when unset.
absl::StatusOr<FlashTiling> TilingFromEnv(const char* var, FlashTiling fallback,
                                          std::initializer_list<FlashTiling> choices) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return fallback;
  std::string names;
  for (FlashTiling t : choices) {
    if (FlashTilingName(t) == v) return t;
    absl::StrAppend(&names, names.empty() ? "" : ", ", FlashTilingName(t));
  }
  return absl::InvalidArgumentError(absl::StrCat(var, "=", v,
                                                 " names no flash attention tiling; expected one "
                                                 "of ", names, " (unset it for the default)"));
}

bool EnvSet(const char* var) {
  const char* v = std::getenv(var);
  return v != nullptr && *v != '\0';
}

// Whether the current device has compute capability 9.0.
absl::StatusOr<bool> OnHopper() {
  WEFT_ASSIGN_OR_RETURN(const DeviceInfo info, CurrentDeviceInfo());
  return info.major == 9 && info.minor == 0;
}

// The wgmma kernels are built for sm_90a alone (its SASS runs on compute
// capability 9.0 only): a wgmma tiling named for another GPU is an error.
absl::StatusOr<FlashTiling> OnlyWhereItRuns(const char* var, FlashTiling t) {
  if (!t.wgmma) return t;
  WEFT_ASSIGN_OR_RETURN(const DeviceInfo info, CurrentDeviceInfo());
  if (info.major == 9 && info.minor == 0) return t;
  return absl::InvalidArgumentError(absl::StrCat(
      var, "=", FlashTilingName(t), " needs a compute capability 9.0 GPU (H100/H200); device ",
      info.index, " is ", info.major, ".", info.minor,
      ". Pick an mma.sync tiling (4x16, 8x16) or unset it"));
}

}  // namespace

absl::StatusOr<FlashTiling> FlashDefaultTiling(FlashTiling hopper_default, bool backward,
                                               int64_t head_size) {
  if (hopper_default == kFlashTiling4x16) return kFlashTiling4x16;
  // Measured on Hopper: elsewhere the tiling measured on an H100 before.
  WEFT_ASSIGN_OR_RETURN(const bool hopper, OnHopper());
  if (!hopper) return kFlashTiling4x16;
  // Tilings that stop at head size 64: two row tiles a warp, 128-key tiles,
  // the wgmma backward.
  const bool small_heads_only = hopper_default.key_tile > 64 ||
                                hopper_default.rows_per_warp > 16 ||
                                (backward && (hopper_default.wgmma || hopper_default.fused_dq));
  if (small_heads_only && head_size > 64) return kFlashTiling4x16;
  return hopper_default;
}

absl::StatusOr<FlashTiling> FlashForwardTiling(int64_t head_size) {
  constexpr const char* kVar = "WEFT_FLASH_FWD_TILING";
  if (!EnvSet(kVar)) return FlashDefaultTiling(kHopperForwardDefault, false, head_size);
  WEFT_ASSIGN_OR_RETURN(
      const FlashTiling t,
      TilingFromEnv(kVar, kFlashTiling4x16,
                    {kFlashTiling4x16, kFlashTiling8x16, kFlashTiling4x32, kFlashTilingWgmma64,
                     kFlashTilingWgmma128, kFlashTilingWgmma64NMajor, kFlashTilingWgmma128NMajor,
                     kFlashTilingWgmma64Pipe, kFlashTilingWgmma128Pipe,
                     kFlashTilingWgmma64NMajorPipe, kFlashTilingWgmma128NMajorPipe,
                     kFlashTilingWgmma64PipeK128, kFlashTilingWgmma128PipeK128,
                     kFlashTilingWgmma64NMajorPipeK128, kFlashTilingWgmma128NMajorPipeK128}));
  return OnlyWhereItRuns(kVar, t);
}

absl::StatusOr<FlashTiling> FlashBackwardTiling(int64_t head_size) {
  constexpr const char* kVar = "WEFT_FLASH_BWD_TILING";
  if (!EnvSet(kVar)) return FlashDefaultTiling(kHopperBackwardDefault, true, head_size);
  WEFT_ASSIGN_OR_RETURN(
      const FlashTiling t,
      TilingFromEnv(kVar, kFlashTiling4x16,
                    {kFlashTiling4x16, kFlashTiling8x16, kFlashTilingWgmma64,
                     kFlashTilingWgmma128, kFlashTilingWgmma64NMajor, kFlashTilingWgmma128NMajor,
                     kFlashTilingWgmma64Pipe, kFlashTilingWgmma128Pipe,
                     kFlashTilingWgmma64NMajorPipe, kFlashTilingWgmma128NMajorPipe,
                     kFlashTilingFusedDq}));
  return OnlyWhereItRuns(kVar, t);
}

absl::Status LaunchAttentionForward(void* out, float* lse, const void* qkv, DType dtype,
                                    int64_t batch, int64_t seq, int64_t num_heads,
                                    int64_t head_size, cudaStream_t stream) {
  const AttentionDims d{batch, seq, num_heads, head_size};
  if (batch * seq * num_heads == 0) return absl::OkStatus();
  if (FlashAttentionApplies(dtype, head_size, {out, qkv})) {
    WEFT_ASSIGN_OR_RETURN(const FlashTiling tiling, FlashForwardTiling(head_size));
    return LaunchFlashForward(out, lse, qkv, d, tiling, stream);
  }
  return LaunchSimpleForward(out, lse, qkv, dtype, d, stream);
}

namespace {
// dsum's floats, rounded up to 16 bytes so the flash workspace after it is aligned.
int64_t RowDotFloats(const AttentionDims& d) { return CeilDiv(d.b * d.t * d.nh, 4) * 4; }
}  // namespace

absl::StatusOr<int64_t> AttentionBackwardScratchFloats(DType dtype, int64_t batch, int64_t seq,
                                                       int64_t num_heads, int64_t head_size) {
  const AttentionDims d{batch, seq, num_heads, head_size};
  // The flash kernels' checks without the pointers: a flash workspace that
  // goes unused (unaligned operands) only costs memory.
  if (!FlashAttentionApplies(dtype, head_size, {})) return RowDotFloats(d);
  WEFT_ASSIGN_OR_RETURN(const FlashTiling tiling, FlashBackwardTiling(head_size));
  return RowDotFloats(d) + FlashBackwardWorkspaceFloats(d, tiling);
}

absl::Status LaunchAttentionBackward(void* dqkv, const void* dout, const void* qkv,
                                     const void* out, const float* lse, DType dtype,
                                     int64_t batch, int64_t seq, int64_t num_heads,
                                     int64_t head_size, float* scratch, int64_t scratch_floats,
                                     cudaStream_t stream) {
  const AttentionDims d{batch, seq, num_heads, head_size};
  if (batch * seq * num_heads == 0) return absl::OkStatus();
  if (scratch_floats < RowDotFloats(d)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention backward: ", scratch_floats, " floats of scratch; expected at least ",
        RowDotFloats(d), " (size it with AttentionBackwardScratchFloats)"));
  }
  WEFT_RETURN_IF_ERROR(LaunchAttentionRowDot(scratch, dout, out, dtype, d, stream));
  if (FlashAttentionApplies(dtype, head_size, {dqkv, dout, qkv})) {
    WEFT_ASSIGN_OR_RETURN(const FlashTiling tiling, FlashBackwardTiling(head_size));
    // The tiling is read again here: a scratch sized for another one (the
    // environment changed in between) is an error, never an overrun.
    const int64_t needed = RowDotFloats(d) + FlashBackwardWorkspaceFloats(d, tiling);
    if (scratch_floats < needed) {
      return absl::InvalidArgumentError(absl::StrCat(
          "attention backward: ", scratch_floats, " floats of scratch; the ",
          FlashTilingName(tiling), " tiling needs ", needed,
          " (size it with AttentionBackwardScratchFloats just before)"));
    }
    return LaunchFlashBackward(dqkv, dout, qkv, lse, scratch, scratch + RowDotFloats(d), d, tiling,
                               stream);
  }
  return LaunchSimpleBackward(dqkv, dout, qkv, lse, scratch, dtype, d, stream);
}

}  // namespace weft::cuda
