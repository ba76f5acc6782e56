// Blockwise causal attention for ring (context-parallel) attention: the
// queries of one rank against one K/V block, masked by global positions
// (TokenChunks), merged into running (out, lse) by the log-sum-exp rule.
// Warp per row like the simple kernels (attention_simple.cu): a lane holds
// head dimensions lane, lane+32, ...; forward is an online softmax over the
// block's visible keys; backward recomputes probabilities from the merged
// lse, one kernel per query row (dQ +=) and one per key row (dK, dV +=), so
// every output element has one writer and no atomics are needed. bf16 with
// head sizes 32, 64 and 128 runs the tensor-core kernels of
// attention_flash_block_fwd.cu and attention_flash_block_bwd.cu instead.
#include "core/kernels/cuda/attention.h"
#include "core/kernels/cuda/attention_internal.h"
#include "core/kernels/cuda/attention_ring.cuh"
#include "core/kernels/cuda/common.cuh"

namespace weft::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kBlockThreads = kWarps * kWarpSize;
constexpr int kLaneDims = kMaxAttentionHeadSize / kWarpSize;

// Operand layout: row stride and the columns where q, k, v start.
struct Layout {
  int64_t tq, tk, q_ld, kv_ld, k_col, v_col;
  int nh, hs;
};

__device__ __forceinline__ bool RowOf(int64_t rows, int64_t t, int nh, int64_t& b, int& h,
                                      int64_t& i) {
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
  if (row >= rows) return false;
  i = row % t;
  const int64_t bh = row / t;
  h = static_cast<int>(bh % nh);
  b = bh / nh;
  return true;
}

template <typename E>
__device__ __forceinline__ void Load(float (&v)[kLaneDims], const E* p, int hs) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int r = 0; r < kLaneDims; ++r) {
    const int d = lane + r * kWarpSize;
    v[r] = d < hs ? ToF(p[d]) : 0.0f;
  }
}

// p[d] += v[d] (one lane per element: no races).
template <typename E>
__device__ __forceinline__ void AddTo(E* p, const float (&v)[kLaneDims], int hs) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int r = 0; r < kLaneDims; ++r) {
    const int d = lane + r * kWarpSize;
    if (d < hs) p[d] = FromF<E>(ToF(p[d]) + v[r]);
  }
}

template <typename E>
__device__ __forceinline__ float WarpDot(const float (&x)[kLaneDims], const E* y, int hs) {
  const int lane = threadIdx.x % kWarpSize;
  float acc = 0.0f;
#pragma unroll
  for (int r = 0; r < kLaneDims; ++r) {
    const int d = lane + r * kWarpSize;
    if (d < hs) acc += x[r] * ToF(y[d]);
  }
  return WarpSum(acc);
}

template <typename E>
__global__ void BlockForwardKernel(E* __restrict__ out, float* __restrict__ lse,
                                   const E* __restrict__ q, const E* __restrict__ kv, int64_t rows,
                                   Layout l, Chunks qc, Chunks kc, float scale, bool accumulate) {
  int64_t b, i;
  int h;
  if (!RowOf(rows, l.tq, l.nh, b, h, i)) return;
  const int C = l.nh * l.hs;
  float qv[kLaneDims], o[kLaneDims] = {};
  Load(qv, q + (b * l.tq + i) * l.q_ld + h * l.hs, l.hs);
  const int64_t pos = PositionOf(qc, i);
  float m = -INFINITY, sum = 0.0f;
  const int lane = threadIdx.x % kWarpSize;
  for (int c = 0; c < kc.count; ++c) {
    if (kc.off[c] > pos) continue;
    const int64_t n = min(kc.len, pos - kc.off[c] + 1);
    for (int64_t jj = 0; jj < n; ++jj) {
      const E* row = kv + (b * l.tk + c * kc.len + jj) * l.kv_ld + h * l.hs;
      const float s = WarpDot(qv, row + l.k_col, l.hs) * scale;
      const float mn = fmaxf(m, s);
      const float alpha = expf(m - mn), p = expf(s - mn);
      sum = sum * alpha + p;
#pragma unroll
      for (int r = 0; r < kLaneDims; ++r) {
        const int d = lane + r * kWarpSize;
        if (d < l.hs) o[r] = o[r] * alpha + p * ToF(row[l.v_col + d]);
      }
      m = mn;
    }
  }
  const float lb = sum > 0.0f ? m + logf(sum) : -INFINITY;
  float* pl = lse + (b * l.nh + h) * l.tq + i;
  const float la = accumulate ? *pl : -INFINITY;
  E* po = out + (b * l.tq + i) * C + h * l.hs;
  float wa, wb, merged;
  MergeWeights(la, lb, wa, wb, merged);
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
  for (int r = 0; r < kLaneDims; ++r) {
    const int d = lane + r * kWarpSize;
    if (d < l.hs) {
      const float old = wa > 0.0f ? ToF(po[d]) * wa : 0.0f;
      po[d] = FromF<E>(old + o[r] * inv * wb);
    }
  }
  __syncwarp();
  if (lane == 0) *pl = merged;
}

template <typename E>
__global__ void BlockBackwardQKernel(E* __restrict__ dq, const E* __restrict__ dout,
                                     const E* __restrict__ q, const E* __restrict__ kv,
                                     const float* __restrict__ lse, const float* __restrict__ dsum,
                                     int64_t rows, Layout l, Chunks qc, Chunks kc, float scale) {
  int64_t b, i;
  int h;
  if (!RowOf(rows, l.tq, l.nh, b, h, i)) return;
  const int C = l.nh * l.hs;
  const int64_t bh = b * l.nh + h;
  const float row_lse = lse[bh * l.tq + i], row_d = dsum[bh * l.tq + i];
  if (row_lse == -INFINITY) return;
  float qv[kLaneDims], go[kLaneDims], acc[kLaneDims] = {};
  Load(qv, q + (b * l.tq + i) * l.q_ld + h * l.hs, l.hs);
  Load(go, dout + (b * l.tq + i) * C + h * l.hs, l.hs);
  const int64_t pos = PositionOf(qc, i);
  const int lane = threadIdx.x % kWarpSize;
  for (int c = 0; c < kc.count; ++c) {
    if (kc.off[c] > pos) continue;
    const int64_t n = min(kc.len, pos - kc.off[c] + 1);
    for (int64_t jj = 0; jj < n; ++jj) {
      const E* row = kv + (b * l.tk + c * kc.len + jj) * l.kv_ld + h * l.hs;
      const float p = expf(WarpDot(qv, row + l.k_col, l.hs) * scale - row_lse);
      const float ds = p * (WarpDot(go, row + l.v_col, l.hs) - row_d) * scale;
#pragma unroll
      for (int r = 0; r < kLaneDims; ++r) {
        const int d = lane + r * kWarpSize;
        if (d < l.hs) acc[r] += ds * ToF(row[l.k_col + d]);
      }
    }
  }
  AddTo(dq + (b * l.tq + i) * l.q_ld + h * l.hs, acc, l.hs);
}

template <typename E>
__global__ void BlockBackwardKVKernel(E* __restrict__ dkv, const E* __restrict__ dout,
                                      const E* __restrict__ q, const E* __restrict__ kv,
                                      const float* __restrict__ lse, const float* __restrict__ dsum,
                                      int64_t rows, Layout l, Chunks qc, Chunks kc, float scale) {
  int64_t b, j;
  int h;
  if (!RowOf(rows, l.tk, l.nh, b, h, j)) return;
  const int C = l.nh * l.hs;
  const int64_t bh = b * l.nh + h;
  const E* row = kv + (b * l.tk + j) * l.kv_ld + h * l.hs;
  float k[kLaneDims], v[kLaneDims], dk[kLaneDims] = {}, dv[kLaneDims] = {};
  Load(k, row + l.k_col, l.hs);
  Load(v, row + l.v_col, l.hs);
  const int64_t pos = PositionOf(kc, j);
  const int lane = threadIdx.x % kWarpSize;
  for (int c = 0; c < qc.count; ++c) {
    const int64_t last = qc.off[c] + qc.len - 1;
    if (last < pos) continue;  // every query of this chunk precedes the key
    const int64_t first = pos > qc.off[c] ? pos - qc.off[c] : 0;
    for (int64_t ii = first; ii < qc.len; ++ii) {
      const int64_t i = c * qc.len + ii;
      const float row_lse = lse[bh * l.tq + i];
      if (row_lse == -INFINITY) continue;
      const E* qi = q + (b * l.tq + i) * l.q_ld + h * l.hs;
      const E* go = dout + (b * l.tq + i) * C + h * l.hs;
      const float p = expf(WarpDot(k, qi, l.hs) * scale - row_lse);
      const float ds = p * (WarpDot(v, go, l.hs) - dsum[bh * l.tq + i]) * scale;
#pragma unroll
      for (int r = 0; r < kLaneDims; ++r) {
        const int d = lane + r * kWarpSize;
        if (d < l.hs) {
          dk[r] += ds * ToF(qi[d]);
          dv[r] += p * ToF(go[d]);
        }
      }
    }
  }
  E* drow = dkv + (b * l.tk + j) * l.kv_ld + h * l.hs;
  AddTo(drow + l.k_col, dk, l.hs);
  AddTo(drow + l.v_col, dv, l.hs);
}

unsigned Grid(int64_t rows) { return static_cast<unsigned>(CeilDiv(rows, kWarps)); }

template <typename E>
absl::Status ForwardT(E* out, float* lse, const E* q, const E* kv, const BlockAttentionArgs& a,
                      bool accumulate, cudaStream_t stream) {
  const Layout l{a.tq,
                 a.tk,
                 a.q_width,
                 a.kv_width,
                 a.kv_width == 3 * a.nh * a.hs ? a.nh * a.hs : 0,
                 0,
                 static_cast<int>(a.nh),
                 static_cast<int>(a.hs)};
  Layout lv = l;
  lv.v_col = l.k_col + a.nh * a.hs;
  const float scale = 1.0f / sqrtf(static_cast<float>(a.hs));
  const int64_t rows = a.b * a.nh * a.tq;
  if (rows == 0) return absl::OkStatus();
  BlockForwardKernel<E><<<Grid(rows), kBlockThreads, 0, stream>>>(
      out, lse, q, kv, rows, lv, ToChunks(a.q_chunks), ToChunks(a.kv_chunks), scale, accumulate);
  return CheckLaunch("BlockForwardKernel");
}

template <typename E>
absl::Status BackwardT(E* dq, E* dkv, const E* dout, const E* q, const E* kv, const float* lse,
                       const float* dsum, const BlockAttentionArgs& a, cudaStream_t stream) {
  Layout l{a.tq,
           a.tk,
           a.q_width,
           a.kv_width,
           a.kv_width == 3 * a.nh * a.hs ? a.nh * a.hs : 0,
           0,
           static_cast<int>(a.nh),
           static_cast<int>(a.hs)};
  l.v_col = l.k_col + a.nh * a.hs;
  const float scale = 1.0f / sqrtf(static_cast<float>(a.hs));
  const Chunks qc = ToChunks(a.q_chunks), kc = ToChunks(a.kv_chunks);
  if (a.b * a.nh * a.tq > 0) {
    BlockBackwardQKernel<E><<<Grid(a.b * a.nh * a.tq), kBlockThreads, 0, stream>>>(
        dq, dout, q, kv, lse, dsum, a.b * a.nh * a.tq, l, qc, kc, scale);
    WEFT_RETURN_IF_ERROR(CheckLaunch("BlockBackwardQKernel"));
  }
  if (a.b * a.nh * a.tk > 0) {
    BlockBackwardKVKernel<E><<<Grid(a.b * a.nh * a.tk), kBlockThreads, 0, stream>>>(
        dkv, dout, q, kv, lse, dsum, a.b * a.nh * a.tk, l, qc, kc, scale);
    WEFT_RETURN_IF_ERROR(CheckLaunch("BlockBackwardKVKernel"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LaunchAttentionBlockForward(void* out, float* lse, const void* q, const void* kv,
                                         DType dtype, const BlockAttentionArgs& a, bool accumulate,
                                         cudaStream_t stream) {
  if (FlashBlockAttentionApplies(dtype, a, {out, q, kv})) {
    return LaunchFlashBlockForward(out, lse, q, kv, a, accumulate, stream);
  }
  if (dtype == DType::kF32) {
    return ForwardT(static_cast<float*>(out), lse, static_cast<const float*>(q),
                    static_cast<const float*>(kv), a, accumulate, stream);
  }
  return ForwardT(static_cast<bf16*>(out), lse, static_cast<const bf16*>(q),
                  static_cast<const bf16*>(kv), a, accumulate, stream);
}

absl::Status LaunchAttentionBlockBackward(void* dq, void* dkv, const void* dout, const void* q,
                                          const void* kv, const void* out, const float* lse,
                                          DType dtype, const BlockAttentionArgs& a, float* scratch,
                                          cudaStream_t stream) {
  // D_i = dO_i . O_i of the merged output, one per (b, h, query row).
  WEFT_RETURN_IF_ERROR(LaunchAttentionRowDot(scratch, dout, out, dtype,
                                             AttentionDims{a.b, a.tq, a.nh, a.hs}, stream));
  if (FlashBlockAttentionApplies(dtype, a, {dq, dkv, dout, q, kv})) {
    return LaunchFlashBlockBackward(dq, dkv, dout, q, kv, lse, scratch, a, stream);
  }
  if (dtype == DType::kF32) {
    return BackwardT(static_cast<float*>(dq), static_cast<float*>(dkv),
                     static_cast<const float*>(dout), static_cast<const float*>(q),
                     static_cast<const float*>(kv), lse, scratch, a, stream);
  }
  return BackwardT(static_cast<bf16*>(dq), static_cast<bf16*>(dkv), static_cast<const bf16*>(dout),
                   static_cast<const bf16*>(q), static_cast<const bf16*>(kv), lse, scratch, a,
                   stream);
}

}  // namespace weft::cuda
