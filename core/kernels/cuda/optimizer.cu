// Multi-tensor AdamW and SGD. Each block updates one 4096-element chunk of
// one tensor; per element: read grad (f32 or bf16), moments and master
// weight, write them back and refresh the parameter copy. Elementwise, so
// the result does not depend on the launch layout at all.
#include <algorithm>

#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/multi_tensor.cuh"
#include "core/kernels/cuda/optimizer.h"

namespace weft::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = kThreads * 16;

enum ParamKind : uint8_t { kNoParam = 0, kF32Param = 1, kBf16Param = 2 };

struct Segment {
  float* master;
  void* param;
  const void* grad;
  float* exp_avg;
  float* exp_avg_sq;
  int64_t n;
};

// Passed by value as a kernel parameter: keep it under 4 KiB with the config.
struct OptBatch {
  BlockMap map;
  Segment seg[kMaxTensorsPerLaunch];
  uint8_t grad_bf16[kMaxTensorsPerLaunch];
  uint8_t param_kind[kMaxTensorsPerLaunch];
  uint8_t decay[kMaxTensorsPerLaunch];
  uint8_t vec4[kMaxTensorsPerLaunch];  // every pointer allows 4-element vector access
};
static_assert(sizeof(OptBatch) + sizeof(AdamWConfig) < 4000, "kernel parameters over 4 KiB");

__device__ __forceinline__ float ClipCoefficient(float max_norm, const float* norm_sq) {
  if (max_norm <= 0.0f) return 1.0f;
  return fminf(1.0f, max_norm / (sqrtf(*norm_sq) + 1e-6f));
}

__device__ __forceinline__ float LoadGrad(const void* g, bool bf, int64_t i) {
  return bf ? ToF(static_cast<const bf16*>(g)[i]) : static_cast<const float*>(g)[i];
}

__device__ __forceinline__ void StoreParam(void* p, uint8_t kind, int64_t i, float w) {
  if (kind == kF32Param) {
    static_cast<float*>(p)[i] = w;
  } else if (kind == kBf16Param) {
    static_cast<bf16*>(p)[i] = __float2bfloat16_rn(w);
  }
}

// The step's lr and bias corrections: from memory when the config points
// there (graph replays), else the config's own.
struct AdamWStep {
  float lr, bias_correction1, bias_correction2;
};
__device__ __forceinline__ AdamWStep StepOf(const AdamWConfig& c) {
  if (c.step_scalars != nullptr) {
    return {c.step_scalars[0], c.step_scalars[1], c.step_scalars[2]};
  }
  return {c.lr, c.bias_correction1, c.bias_correction2};
}

// One AdamW update of moments m, v and master weight w from the scaled grad g.
__device__ __forceinline__ void AdamWElement(float g, float& m, float& v, float& w, float decay,
                                             const AdamWConfig& c, const AdamWStep& k) {
  m = c.beta1 * m + (1.0f - c.beta1) * g;
  v = c.beta2 * v + (1.0f - c.beta2) * g * g;
  const float mhat = m / k.bias_correction1, vhat = v / k.bias_correction2;
  w -= k.lr * (mhat / (sqrtf(vhat) + c.eps) + decay * w);
}

__global__ void __launch_bounds__(kThreads) AdamWKernel(const OptBatch batch, const AdamWConfig c) {
  const int blk = blockIdx.x;
  const int s = TensorOfBlock(batch.map, blk);
  float* const master = batch.seg[s].master;
  void* const param = batch.seg[s].param;
  const void* const grad = batch.seg[s].grad;
  float* const exp_avg = batch.seg[s].exp_avg;
  float* const exp_avg_sq = batch.seg[s].exp_avg_sq;
  const bool grad_bf16 = batch.grad_bf16[s];
  const uint8_t kind = batch.param_kind[s];
  const float decay = batch.decay[s] ? c.weight_decay : 0.0f;
  const float gscale = c.grad_scale * ClipCoefficient(c.max_grad_norm, c.grad_norm_sq);
  const AdamWStep k = StepOf(c);
  const int64_t begin = int64_t(blk - batch.map.block_start[s]) * kChunk;
  const int64_t end = min(batch.seg[s].n, begin + kChunk);
  // Four elements per thread with 16-byte (8-byte for bf16) accesses where
  // the tensors allow it; the same per-element arithmetic either way.
  int64_t tail = begin;
  if (batch.vec4[s]) {
    tail = begin + ((end - begin) & ~int64_t(3));
    for (int64_t i = begin + 4 * threadIdx.x; i < tail; i += 4 * kThreads) {
      float g[4];
      if (grad_bf16) {
        const uint2 raw = *reinterpret_cast<const uint2*>(static_cast<const bf16*>(grad) + i);
        const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
        const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
        g[0] = lo.x, g[1] = lo.y, g[2] = hi.x, g[3] = hi.y;
      } else {
        const float4 gv = *reinterpret_cast<const float4*>(static_cast<const float*>(grad) + i);
        g[0] = gv.x, g[1] = gv.y, g[2] = gv.z, g[3] = gv.w;
      }
      float4 m4 = *reinterpret_cast<float4*>(exp_avg + i);
      float4 v4 = *reinterpret_cast<float4*>(exp_avg_sq + i);
      float4 w4 = *reinterpret_cast<float4*>(master + i);
      AdamWElement(g[0] * gscale, m4.x, v4.x, w4.x, decay, c, k);
      AdamWElement(g[1] * gscale, m4.y, v4.y, w4.y, decay, c, k);
      AdamWElement(g[2] * gscale, m4.z, v4.z, w4.z, decay, c, k);
      AdamWElement(g[3] * gscale, m4.w, v4.w, w4.w, decay, c, k);
      *reinterpret_cast<float4*>(exp_avg + i) = m4;
      *reinterpret_cast<float4*>(exp_avg_sq + i) = v4;
      *reinterpret_cast<float4*>(master + i) = w4;
      if (kind == kF32Param) {
        *reinterpret_cast<float4*>(static_cast<float*>(param) + i) = w4;
      } else if (kind == kBf16Param) {
        const __nv_bfloat162 lo = __floats2bfloat162_rn(w4.x, w4.y);
        const __nv_bfloat162 hi = __floats2bfloat162_rn(w4.z, w4.w);
        uint2 out;
        out.x = *reinterpret_cast<const uint32_t*>(&lo);
        out.y = *reinterpret_cast<const uint32_t*>(&hi);
        *reinterpret_cast<uint2*>(static_cast<bf16*>(param) + i) = out;
      }
    }
  }
  for (int64_t i = tail + threadIdx.x; i < end; i += kThreads) {
    float m = exp_avg[i], v = exp_avg_sq[i], w = master[i];
    AdamWElement(LoadGrad(grad, grad_bf16, i) * gscale, m, v, w, decay, c, k);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    master[i] = w;
    StoreParam(param, kind, i, w);
  }
}

__global__ void __launch_bounds__(kThreads) SgdKernel(const OptBatch batch, const SgdConfig c) {
  const int blk = blockIdx.x;
  const int s = TensorOfBlock(batch.map, blk);
  float* const master = batch.seg[s].master;
  void* const param = batch.seg[s].param;
  const void* const grad = batch.seg[s].grad;
  float* const buf = batch.seg[s].exp_avg;
  const bool grad_bf16 = batch.grad_bf16[s];
  const uint8_t kind = batch.param_kind[s];
  const float decay = batch.decay[s] ? c.weight_decay : 0.0f;
  const float gscale = c.grad_scale * ClipCoefficient(c.max_grad_norm, c.grad_norm_sq);
  const float lr = c.step_scalars != nullptr ? *c.step_scalars : c.lr;
  const int64_t begin = int64_t(blk - batch.map.block_start[s]) * kChunk;
  const int64_t end = min(batch.seg[s].n, begin + kChunk);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    float w = master[i];
    const float g = LoadGrad(grad, grad_bf16, i) * gscale + decay * w;
    float step = g;
    if (buf != nullptr) {
      const float b = c.momentum * buf[i] + g;
      buf[i] = b;
      step = c.nesterov ? g + c.momentum * b : b;
    }
    w -= lr * step;
    master[i] = w;
    StoreParam(param, kind, i, w);
  }
}

// Calls launch(batch, blocks) for each group of up to 64 tensors.
template <typename Launch>
absl::Status ForEachBatch(absl::Span<const OptimizerTensor> tensors, Launch launch) {
  for (size_t first = 0; first < tensors.size(); first += kMaxTensorsPerLaunch) {
    const size_t count = std::min<size_t>(kMaxTensorsPerLaunch, tensors.size() - first);
    OptBatch batch{};
    int64_t blocks = 0;
    for (size_t s = 0; s < count; ++s) {
      const OptimizerTensor& t = tensors[first + s];
      batch.map.block_start[s] = static_cast<int32_t>(blocks);
      batch.seg[s] = Segment{t.master,  t.param,      t.grad,
                             t.exp_avg, t.exp_avg_sq, t.n};
      batch.grad_bf16[s] = t.grad_dtype == DType::kBF16;
      batch.param_kind[s] = t.param == nullptr              ? kNoParam
                            : t.param_dtype == DType::kBF16 ? kBf16Param
                                                            : kF32Param;
      batch.decay[s] = t.weight_decay;
      const size_t grad_align = t.grad_dtype == DType::kBF16 ? 8 : 16;
      const size_t param_align = t.param_dtype == DType::kBF16 ? 8 : 16;
      auto aligned = [](const void* p, size_t a) {
        return p == nullptr || reinterpret_cast<uintptr_t>(p) % a == 0;
      };
      batch.vec4[s] = aligned(t.master, 16) && aligned(t.exp_avg, 16) &&
                      aligned(t.exp_avg_sq, 16) && aligned(t.grad, grad_align) &&
                      aligned(t.param, param_align);
      blocks += CeilDiv(t.n, kChunk);
    }
    batch.map.block_start[count] = static_cast<int32_t>(blocks);
    batch.map.count = static_cast<int32_t>(count);
    if (blocks > 0) WEFT_RETURN_IF_ERROR(launch(batch, static_cast<unsigned>(blocks)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LaunchAdamW(absl::Span<const OptimizerTensor> tensors, const AdamWConfig& config,
                         cudaStream_t stream) {
  return ForEachBatch(tensors, [&](const OptBatch& batch, unsigned blocks) {
    AdamWKernel<<<blocks, kThreads, 0, stream>>>(batch, config);
    return CheckLaunch("AdamWKernel");
  });
}

absl::Status LaunchSgd(absl::Span<const OptimizerTensor> tensors, const SgdConfig& config,
                       cudaStream_t stream) {
  return ForEachBatch(tensors, [&](const OptBatch& batch, unsigned blocks) {
    SgdKernel<<<blocks, kThreads, 0, stream>>>(batch, config);
    return CheckLaunch("SgdKernel");
  });
}

}  // namespace weft::cuda
