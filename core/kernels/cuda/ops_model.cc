// CudaKernelOps: embedding, cross-entropy, dropout, reductions and the
// multi-tensor optimizers.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cuda/cross_entropy.h"
#include "core/kernels/cuda/cuda_ops.h"
#include "core/kernels/cuda/dropout.h"
#include "core/kernels/cuda/elementwise.h"
#include "core/kernels/cuda/embedding.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/kernels/cuda/optimizer.h"
#include "core/kernels/cuda/reduce.h"
#include "core/tensor/cuda/device_guard.h"

namespace weft::cuda {
namespace {

absl::Status CheckDropout(const KernelContext& ctx, const Tensor& out, const Tensor& in,
                          float p) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  if (!(p >= 0.f && p < 1.f)) {
    return InvalidArgument(absl::StrCat("dropout probability ", p), "0 <= p < 1");
  }
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, in, "dropout input"));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, out, "dropout output"));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "dropout output", in.numel()));
  return CheckSameDType(out, "dropout output", in, "dropout input");
}

// The device-side clipping input, when clipping is on.
absl::StatusOr<const float*> NormSq(const KernelContext& ctx, float max_grad_norm,
                                    const Tensor& grad_norm_sq) {
  if (max_grad_norm <= 0) return nullptr;
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, grad_norm_sq, "grad_norm_sq", DType::kF32));
  WEFT_RETURN_IF_ERROR(CheckNumel(grad_norm_sq, "grad_norm_sq", 1));
  return grad_norm_sq.data<float>();
}

// The device-side per-step values (a graph replay), or null.
absl::StatusOr<const float*> StepScalars(const KernelContext& ctx, const Tensor& scalars,
                                         int64_t n) {
  if (!scalars.defined()) return nullptr;
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, scalars, "optimizer step_scalars", DType::kF32));
  WEFT_RETURN_IF_ERROR(CheckNumel(scalars, "optimizer step_scalars", n));
  return scalars.data<float>();
}

absl::StatusOr<OptimizerTensor> CheckSegment(const KernelContext& ctx, const OptimSegment& s,
                                             bool adam, bool need_buffer) {
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, s.master, "optimizer master", DType::kF32));
  const int64_t n = s.master.numel();
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, s.grad, "optimizer grad"));
  WEFT_RETURN_IF_ERROR(CheckNumel(s.grad, "optimizer grad", n));
  OptimizerTensor t;
  t.master = s.master.data<float>();
  t.grad = s.grad.raw_data();
  t.grad_dtype = s.grad.dtype();
  t.n = n;
  t.weight_decay = s.weight_decay;
  if (need_buffer || s.exp_avg.defined()) {
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, s.exp_avg, "optimizer exp_avg", DType::kF32));
    WEFT_RETURN_IF_ERROR(CheckNumel(s.exp_avg, "optimizer exp_avg", n));
    t.exp_avg = s.exp_avg.data<float>();
  }
  if (adam) {
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, s.exp_avg_sq, "optimizer exp_avg_sq", DType::kF32));
    WEFT_RETURN_IF_ERROR(CheckNumel(s.exp_avg_sq, "optimizer exp_avg_sq", n));
    t.exp_avg_sq = s.exp_avg_sq.data<float>();
  }
  if (s.param.defined()) {
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, s.param, "optimizer param"));
    WEFT_RETURN_IF_ERROR(CheckNumel(s.param, "optimizer param", n));
    t.param = s.param.raw_data();
    t.param_dtype = s.param.dtype();
  }
  return t;
}

}  // namespace

absl::Status CudaKernelOps::EmbeddingForward(const KernelContext& ctx, Tensor& out,
                                             const Tensor& tokens, const Tensor& wte,
                                             const Tensor& wpe) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, tokens, "embedding tokens", DType::kI32));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, wte, "embedding wte"));
  if (wte.ndim() != 2 || tokens.ndim() != 2) {
    return InvalidArgument("embedding shapes", "tokens (B, T) and wte (V, C)");
  }
  const int64_t b = tokens.dim(0), t = tokens.dim(1), c = wte.dim(1);
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, out, "embedding out"));
  WEFT_RETURN_IF_ERROR(CheckShape(out, "embedding out", {b, t, c}));
  WEFT_RETURN_IF_ERROR(CheckSameDType(out, "embedding out", wte, "embedding wte"));
  if (wpe.defined()) {
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, wpe, "embedding wpe"));
    WEFT_RETURN_IF_ERROR(CheckSameDType(wpe, "embedding wpe", wte, "embedding wte"));
    if (wpe.ndim() != 2 || wpe.dim(1) != c || wpe.dim(0) < t) {
      return InvalidArgument("wpe has shape " + ShapeString(wpe.shape()),
                             absl::StrCat("(>= ", t, ", ", c, ")"),
                             "the sequence is longer than max_seq_len");
    }
  }
  DeviceGuard guard(ctx.device.index);
  return LaunchEmbeddingForward(out.raw_data(), tokens.data<int32_t>(), wte.raw_data(),
                                wpe.defined() ? wpe.raw_data() : nullptr, wte.dtype(), b, t, c,
                                wte.dim(0), StreamOf(ctx));
}

absl::Status CudaKernelOps::EmbeddingBackward(const KernelContext& ctx, Tensor& dwte,
                                              Tensor& dwpe, const Tensor& dout,
                                              const Tensor& tokens) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, tokens, "embedding tokens", DType::kI32));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dwte, "embedding dwte"));
  if (dwte.ndim() != 2 || tokens.ndim() != 2) {
    return InvalidArgument("embedding shapes", "tokens (B, T) and dwte (V, C)");
  }
  const int64_t b = tokens.dim(0), t = tokens.dim(1), c = dwte.dim(1);
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dout, "embedding dout"));
  WEFT_RETURN_IF_ERROR(CheckShape(dout, "embedding dout", {b, t, c}));
  if (dwpe.defined()) {
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dwpe, "embedding dwpe"));
    WEFT_RETURN_IF_ERROR(CheckSameDType(dwpe, "embedding dwpe", dwte, "embedding dwte"));
    if (dwpe.ndim() != 2 || dwpe.dim(1) != c || dwpe.dim(0) < t) {
      return InvalidArgument("dwpe has shape " + ShapeString(dwpe.shape()),
                             absl::StrCat("(>= ", t, ", ", c, ")"));
    }
  }
  DeviceGuard guard(ctx.device.index);
  WEFT_ASSIGN_OR_RETURN(size_t bytes, EmbeddingBackwardScratchBytes(b * t, dwte.dim(0)));
  WEFT_ASSIGN_OR_RETURN(Tensor scratch, Scratch(ctx, static_cast<int64_t>(bytes)));
  return LaunchEmbeddingBackward(dwte.raw_data(), dwpe.defined() ? dwpe.raw_data() : nullptr,
                                 dwte.dtype(), dout.raw_data(), dout.dtype(),
                                 tokens.data<int32_t>(), b, t, c, dwte.dim(0), /*vocab_begin=*/0,
                                 scratch.raw_data(), bytes, StreamOf(ctx));
}

absl::Status CudaKernelOps::CrossEntropyForwardBackward(const KernelContext& ctx, Tensor& losses,
                                                        Tensor& logits, const Tensor& targets,
                                                        int64_t vocab, float dloss_scale,
                                                        bool compute_grad) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, logits, "cross_entropy logits"));
  if (logits.ndim() < 1 || logits.dim(-1) == 0) {
    return InvalidArgument("cross_entropy logits has shape " + ShapeString(logits.shape()),
                           "(..., padded_vocab) with padded_vocab > 0");
  }
  const int64_t vp = logits.dim(-1), rows = logits.numel() / vp;
  if (vocab <= 0 || vocab > vp) {
    return InvalidArgument(absl::StrCat("vocab ", vocab, " with ", vp, " logit columns"),
                           "0 < vocab <= padded vocab");
  }
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, targets, "cross_entropy targets", DType::kI32));
  WEFT_RETURN_IF_ERROR(CheckNumel(targets, "cross_entropy targets", rows));
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, losses, "cross_entropy losses", DType::kF32));
  WEFT_RETURN_IF_ERROR(CheckNumel(losses, "cross_entropy losses", rows));
  DeviceGuard guard(ctx.device.index);
  return LaunchCrossEntropy(losses.data<float>(), logits.raw_data(), logits.dtype(),
                            targets.data<int32_t>(), rows, vocab, vp, dloss_scale, compute_grad,
                            StreamOf(ctx));
}

absl::Status CudaKernelOps::DropoutForward(const KernelContext& ctx, Tensor& out,
                                           const Tensor& x, float p, const DropoutKey& key) {
  WEFT_RETURN_IF_ERROR(CheckDropout(ctx, out, x, p));
  DeviceGuard guard(ctx.device.index);
  return LaunchDropout(out.raw_data(), x.raw_data(), x.dtype(), x.numel(), p, key,
                       StreamOf(ctx));
}

absl::Status CudaKernelOps::DropoutBackward(const KernelContext& ctx, Tensor& dx,
                                            const Tensor& dy, float p, const DropoutKey& key) {
  // The same mask and scale apply to the gradient.
  WEFT_RETURN_IF_ERROR(CheckDropout(ctx, dx, dy, p));
  DeviceGuard guard(ctx.device.index);
  return LaunchDropout(dx.raw_data(), dy.raw_data(), dy.dtype(), dy.numel(), p, key,
                       StreamOf(ctx));
}

absl::Status CudaKernelOps::Sum(const KernelContext& ctx, Tensor& out, const Tensor& x,
                                bool accumulate) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, x, "sum x"));
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, out, "sum out", DType::kF32));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "sum out", 1));
  DeviceGuard guard(ctx.device.index);
  WEFT_ASSIGN_OR_RETURN(Tensor scratch, Scratch(ctx, 4 * SumScratchFloats(x.numel())));
  return LaunchSum(out.data<float>(), x.raw_data(), x.dtype(), x.numel(), accumulate,
                   scratch.data<float>(), StreamOf(ctx));
}

absl::Status CudaKernelOps::SumSquares(const KernelContext& ctx, Tensor& out,
                                       absl::Span<const Tensor> tensors) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, out, "sum_squares out", DType::kF32));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "sum_squares out", 1));
  std::vector<ReduceInput> inputs;
  inputs.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, t, "sum_squares input"));
    inputs.push_back({t.raw_data(), t.dtype(), t.numel()});
  }
  DeviceGuard guard(ctx.device.index);
  WEFT_ASSIGN_OR_RETURN(Tensor scratch, Scratch(ctx, 4 * SumSquaresScratchFloats(inputs)));
  return LaunchSumSquares(out.data<float>(), inputs, scratch.data<float>(), StreamOf(ctx));
}

absl::Status CudaKernelOps::ZeroTensors(const KernelContext& ctx,
                                        absl::Span<const Tensor> tensors) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  std::vector<void*> ptrs;
  std::vector<int64_t> bytes;
  for (const Tensor& t : tensors) {
    if (!t.defined() || t.numel() == 0) continue;
    if (t.device() != ctx.device) {
      return InvalidArgument(absl::StrCat("zeroing a tensor on ", t.device().ToString()),
                             "tensors on " + ctx.device.ToString());
    }
    if (!t.is_contiguous()) {
      return InvalidArgument("zeroing a non-contiguous tensor", "contiguous tensors");
    }
    ptrs.push_back(t.raw_data());
    bytes.push_back(t.numel() * static_cast<int64_t>(DTypeSize(t.dtype())));
  }
  DeviceGuard guard(ctx.device.index);
  return LaunchZeroMany(ptrs, bytes, StreamOf(ctx));
}

absl::Status CudaKernelOps::AdamW(const KernelContext& ctx, absl::Span<OptimSegment> segments,
                                  const AdamWHyper& h) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  if (h.step < 1 && !h.step_scalars.defined()) {
    return InvalidArgument("AdamW step < 1", "a 1-based step");
  }
  std::vector<OptimizerTensor> tensors;
  tensors.reserve(segments.size());
  for (const OptimSegment& s : segments) {
    WEFT_ASSIGN_OR_RETURN(OptimizerTensor t, CheckSegment(ctx, s, /*adam=*/true, true));
    tensors.push_back(t);
  }
  AdamWConfig c;
  c.lr = h.lr;
  c.beta1 = h.beta1;
  c.beta2 = h.beta2;
  c.eps = h.eps;
  c.weight_decay = h.weight_decay;
  c.grad_scale = h.grad_scale;
  c.max_grad_norm = h.max_grad_norm;
  // Same float expressions as the CPU reference, evaluated on the host.
  const std::array<float, 3> k = AdamWStepScalars(h.lr, h.beta1, h.beta2, std::max<int64_t>(h.step, 1));
  c.bias_correction1 = k[1];
  c.bias_correction2 = k[2];
  WEFT_ASSIGN_OR_RETURN(c.grad_norm_sq, NormSq(ctx, h.max_grad_norm, h.grad_norm_sq));
  WEFT_ASSIGN_OR_RETURN(c.step_scalars, StepScalars(ctx, h.step_scalars, 3));
  DeviceGuard guard(ctx.device.index);
  return LaunchAdamW(tensors, c, StreamOf(ctx));
}

absl::Status CudaKernelOps::Sgd(const KernelContext& ctx, absl::Span<OptimSegment> segments,
                                const SgdHyper& h) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  std::vector<OptimizerTensor> tensors;
  tensors.reserve(segments.size());
  for (const OptimSegment& s : segments) {
    // Without momentum the buffer is optional (the CPU reference keeps it).
    WEFT_ASSIGN_OR_RETURN(OptimizerTensor t,
                          CheckSegment(ctx, s, /*adam=*/false, h.momentum != 0.0f));
    tensors.push_back(t);
  }
  SgdConfig c;
  c.lr = h.lr;
  c.momentum = h.momentum;
  c.weight_decay = h.weight_decay;
  c.grad_scale = h.grad_scale;
  c.max_grad_norm = h.max_grad_norm;
  c.nesterov = h.nesterov;
  WEFT_ASSIGN_OR_RETURN(c.grad_norm_sq, NormSq(ctx, h.max_grad_norm, h.grad_norm_sq));
  WEFT_ASSIGN_OR_RETURN(c.step_scalars, StepScalars(ctx, h.step_scalars, 1));
  DeviceGuard guard(ctx.device.index);
  return LaunchSgd(tensors, c, StreamOf(ctx));
}

}  // namespace weft::cuda
