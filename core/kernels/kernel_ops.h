// KernelOps: the compute kernels every device implements, behind one
// interface so layers dispatch on Device and never on #ifdef.
//
// Conventions (shared by the CPU reference and the CUDA kernels):
// - Tensors are row-major and contiguous; shapes are asserted by the caller
//   (layers) and checked again by implementations, which return
//   InvalidArgument naming the operand on mismatch.
// - "Compute" tensors (activations, weights used by forward) are f32 or bf16;
//   on CPU they are f32. Parameter gradients are f32 or bf16 ("grad dtype");
//   statistics saved for backward (layernorm mean/rstd, attention logsumexp)
//   and losses are always f32.
// - Ops named ...Backward ACCUMULATE into parameter gradients (+=), so
//   gradient accumulation over micro-batches needs no extra pass. Input
//   gradients (dx) are overwritten unless the op says otherwise.
// - Every op is enqueued on ctx.stream and never synchronizes the host.
// - Random numbers (dropout) come from Philox4x32-10 keyed by a DropoutKey
//   (core/kernels/philox.h): the step's seed, and a counter made of each
//   element's sample in the global batch and its place in that sample, so
//   masks do not depend on the launch shape, the device, or how the batch
//   was split over ranks and micro-batches.
#ifndef WEFT_CORE_KERNELS_KERNEL_OPS_H_
#define WEFT_CORE_KERNELS_KERNEL_OPS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/kernels/philox.h"
#include "core/kernels/token_chunks.h"
#include "core/tensor/device.h"
#include "core/tensor/tensor.h"

namespace weft {

struct KernelContext {
  Device device;
  NativeStream stream = nullptr;
  // Where kernels take their scratch memory; null: the device's default
  // allocator. A captured CUDA graph's step passes the graph's own.
  Allocator* allocator = nullptr;
};

enum class Epilogue {
  kNone,
  kBias,      // out = mm + bias (bias broadcast over rows)
  kBiasGelu,  // aux = mm + bias; out = gelu(aux)
  kDGelu,     // out = mm * gelu'(aux)  (aux: the pre-activation from forward)
};

// out (M, N) [+]= op(a) · op(b), then the epilogue.
//   op(a) = a (M, K) or, with trans_a, a^T where a is (K, M)
//   op(b) = b (K, N) or, with trans_b, b^T where b is (N, K)
// Linear forward: out = x · w^T           (a=x, b=w, trans_b)
// Linear dx:      dx = dy · w             (a=dy, b=w)
// Linear dw:      dw += dy^T · x          (a=dy, trans_a, b=x, accumulate)
struct GemmArgs {
  Tensor out;
  Tensor a;
  Tensor b;
  bool trans_a = false;
  bool trans_b = false;
  bool accumulate = false;  // out += result (kNone epilogue only)
  Epilogue epilogue = Epilogue::kNone;
  Tensor bias;       // (N): kBias, kBiasGelu
  Tensor aux;        // (M, N): written by kBiasGelu, read by kDGelu
  Tensor bias_grad;  // (N), optional with kDGelu: += column sums of `out`
  // (M), optional with trans_a and kNone: += column sums of a (K, M), i.e.
  // the bias gradient beside a weight gradient dW = dyᵀ·x, from the GEMM's
  // own read of dy (cuBLASLt's BGRAD epilogue) where the backend can (on
  // CUDA WEFT_BIAS_GRAD=column-sum makes it a second pass, for comparison).
  Tensor a_col_sums;
};

struct GemmDims {
  int64_t m = 0, n = 0, k = 0;
};
// Shape and argument rules every Gemm implementation enforces (rank 2,
// matching inner dimensions, accumulate only without an epilogue,
// bias_grad only with kDGelu, a_col_sums only with trans_a and kNone). Device and dtype checks are the backend's.
absl::StatusOr<GemmDims> CheckGemmArgs(const GemmArgs& args);

// One parameter (or shard of one) that an optimizer updates in place.
struct OptimSegment {
  Tensor master;    // f32 weights the update applies to (always defined)
  Tensor param;     // compute-dtype copy refreshed after the update; may be
                    // undefined when the master tensor is the parameter
  Tensor grad;      // same numel as master, f32 or bf16
  Tensor exp_avg;   // f32 first moment (AdamW) or momentum buffer (SGD)
  Tensor exp_avg_sq;  // f32 second moment (AdamW only)
  bool weight_decay = true;
};

struct AdamWHyper {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  int64_t step = 1;          // 1-based, for bias correction
  float grad_scale = 1.0f;   // multiplies every gradient (e.g. 1/accum)
  // Clipping without a host sync: when max_grad_norm > 0, gradients are
  // scaled by min(1, max_grad_norm / (sqrt(*grad_norm_sq) + 1e-6)) where
  // grad_norm_sq is a one-element f32 tensor on the device.
  float max_grad_norm = 0.0f;
  Tensor grad_norm_sq;
  // When defined: f32 [lr, 1 - beta1^step, 1 - beta2^step] on the device,
  // read by the update when it runs instead of lr and step. A replayed CUDA
  // graph keeps its kernels' arguments, so per-step values must be in memory.
  Tensor step_scalars;
};

// The per-step values of AdamW's update, one float expression for every
// device: {lr, 1 - beta1^step, 1 - beta2^step}.
std::array<float, 3> AdamWStepScalars(float lr, float beta1, float beta2, int64_t step);
// Host implementations: those values from `h.step_scalars` (a CPU tensor)
// when defined, else from lr and step.
absl::StatusOr<std::array<float, 3>> HostAdamWStepScalars(const AdamWHyper& h);

struct SgdHyper {
  float lr = 0.1f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  bool nesterov = false;
  float grad_scale = 1.0f;
  float max_grad_norm = 0.0f;
  Tensor grad_norm_sq;
  Tensor step_scalars;  // when defined: f32 [lr] on the device (see AdamWHyper)
};

// Host implementations: lr from `h.step_scalars` when defined, else h.lr.
absl::StatusOr<float> HostSgdLr(const SgdHyper& h);

class KernelOps {
 public:
  virtual ~KernelOps() = default;

  // The ops (kernel_ops_list.inc): pure virtual, two with a default.
#define WEFT_KERNEL_OP(name, params) virtual absl::Status name params = 0;
#define WEFT_KERNEL_OP_WITH_DEFAULT(name, params) virtual absl::Status name params;
#include "core/kernels/kernel_ops_list.inc"
#undef WEFT_KERNEL_OP
#undef WEFT_KERNEL_OP_WITH_DEFAULT

  // Sets every element of every tensor to zero (the gradients at a step's
  // start). Default: one Tensor::Zero each; CUDA: one launch per 64 tensors
  // instead of a memset per parameter.
  virtual absl::Status ZeroTensors(const KernelContext& ctx, absl::Span<const Tensor> tensors);

  // Host threads the kernels may use (CPU BLAS); <= 0 keeps the default.
  virtual void SetNumThreads(int threads) { (void)threads; }
};

// Kernel implementations register per device type, like DeviceBackends.
void RegisterKernelOps(DeviceType type, KernelOps* ops);
absl::StatusOr<KernelOps*> GetKernelOps(DeviceType type);
bool RegisterKernelOpsAtStartup(DeviceType type, KernelOps* ops);

}  // namespace weft

#endif  // WEFT_CORE_KERNELS_KERNEL_OPS_H_
