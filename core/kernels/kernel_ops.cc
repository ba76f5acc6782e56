#include "core/kernels/kernel_ops.h"

#include <array>
#include <cmath>
#include <mutex>

#include "core/base/check.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {
namespace {

struct Registry {
  std::mutex mu;
  std::array<KernelOps*, kNumDeviceTypes> ops{};  // indexed by DeviceType
};

Registry& GetRegistry() {
  static auto* r = new Registry;
  return *r;
}

}  // namespace

absl::Status KernelOps::AttentionBlockForward(const KernelContext& ctx, Tensor&, Tensor&,
                                              const Tensor&, const TokenChunks&, const Tensor&,
                                              const TokenChunks&, int, bool) {
  return absl::UnimplementedError(absl::StrCat(
      "blockwise attention (context parallelism) has no kernel on ", ctx.device.ToString(),
      "; expected a device whose kernels implement AttentionBlockForward. Hint: run cp on CPU"));
}

absl::Status KernelOps::AttentionBlockBackward(const KernelContext& ctx, Tensor&, Tensor&,
                                               const Tensor&, const Tensor&, const TokenChunks&,
                                               const Tensor&, const TokenChunks&, const Tensor&,
                                               const Tensor&, int) {
  return absl::UnimplementedError(absl::StrCat(
      "blockwise attention backward (context parallelism) has no kernel on ",
      ctx.device.ToString(), "; expected a device whose kernels implement "
      "AttentionBlockBackward. Hint: run cp on CPU"));
}

absl::Status KernelOps::ZeroTensors(const KernelContext& ctx, absl::Span<const Tensor> tensors) {
  for (Tensor t : tensors) WEFT_RETURN_IF_ERROR(t.Zero(ctx.stream));  // handles share storage
  return absl::OkStatus();
}

absl::StatusOr<GemmDims> CheckGemmArgs(const GemmArgs& g) {
  if (g.a.ndim() != 2 || g.b.ndim() != 2 || g.out.ndim() != 2) {
    return InvalidArgument("gemm operands must be 2-D", "a, b and out of rank 2",
                           "flatten batch dimensions into rows first");
  }
  GemmDims d;
  d.m = g.trans_a ? g.a.dim(1) : g.a.dim(0);
  d.k = g.trans_a ? g.a.dim(0) : g.a.dim(1);
  const int64_t kb = g.trans_b ? g.b.dim(1) : g.b.dim(0);
  d.n = g.trans_b ? g.b.dim(0) : g.b.dim(1);
  if (d.k != kb || g.out.dim(0) != d.m || g.out.dim(1) != d.n) {
    return InvalidArgument(absl::StrCat("gemm shapes: op(a) ", d.m, "x", d.k, ", op(b) ", kb,
                                        "x", d.n, ", out ", ShapeString(g.out.shape())),
                           "op(a) MxK, op(b) KxN, out MxN");
  }
  if (g.accumulate && g.epilogue != Epilogue::kNone) {
    return InvalidArgument("gemm accumulate with an epilogue", "accumulate only with kNone");
  }
  if (g.bias_grad.defined() && g.epilogue != Epilogue::kDGelu) {
    return InvalidArgument("gemm bias_grad without the kDGelu epilogue",
                           "bias_grad only with kDGelu (use BiasGrad otherwise)");
  }
  if (g.a_col_sums.defined() && (!g.trans_a || g.epilogue != Epilogue::kNone)) {
    return InvalidArgument("gemm a_col_sums without trans_a, or with an epilogue",
                           "a_col_sums only beside a weight gradient: trans_a, kNone",
                           "use BiasGrad otherwise");
  }
  if (g.a_col_sums.defined() && g.a_col_sums.numel() != d.m) {
    return InvalidArgument(absl::StrCat("gemm a_col_sums of ", g.a_col_sums.numel(), " elements"),
                           absl::StrCat("M = ", d.m, " (the columns of a)"));
  }
  return d;
}

std::array<float, 3> AdamWStepScalars(float lr, float beta1, float beta2, int64_t step) {
  return {lr, 1.0f - std::pow(beta1, static_cast<float>(step)),
          1.0f - std::pow(beta2, static_cast<float>(step))};
}

namespace {

absl::Status CheckHostScalars(const Tensor& t, int64_t n) {
  if (t.dtype() != DType::kF32 || t.numel() != n || !t.device().is_cpu()) {
    return InvalidArgument(absl::StrCat("optimizer step_scalars ", ShapeString(t.shape()), " ",
                                        DTypeName(t.dtype()), " on ", t.device().ToString()),
                           absl::StrCat(n, " f32 values in host memory for a CPU update"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::array<float, 3>> HostAdamWStepScalars(const AdamWHyper& h) {
  if (!h.step_scalars.defined()) {
    if (h.step < 1) return InvalidArgument("AdamW step < 1", "a 1-based step");
    return AdamWStepScalars(h.lr, h.beta1, h.beta2, h.step);
  }
  WEFT_RETURN_IF_ERROR(CheckHostScalars(h.step_scalars, 3));
  const float* k = h.step_scalars.data<float>();
  return std::array<float, 3>{k[0], k[1], k[2]};
}

absl::StatusOr<float> HostSgdLr(const SgdHyper& h) {
  if (!h.step_scalars.defined()) return h.lr;
  WEFT_RETURN_IF_ERROR(CheckHostScalars(h.step_scalars, 1));
  return *h.step_scalars.data<float>();
}

void RegisterKernelOps(DeviceType type, KernelOps* ops) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  KernelOps*& slot = r.ops[static_cast<int>(type)];
  WEFT_CHECK(slot == nullptr) << "two KernelOps registered for one device type";
  slot = ops;
}

bool RegisterKernelOpsAtStartup(DeviceType type, KernelOps* ops) {
  RegisterKernelOps(type, ops);
  return true;
}

absl::StatusOr<KernelOps*> GetKernelOps(DeviceType type) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (KernelOps* ops = r.ops[static_cast<int>(type)]) return ops;
  if (type == DeviceType::kCUDA) {
    return FailedPrecondition("CUDA kernels are not linked into this binary",
                              "a binary built with the CUDA toolkit that depends on "
                              "//core/kernels/cuda",
                              "install the CUDA toolkit and rebuild, or use --device=cpu");
  }
  if (type == DeviceType::kMeta) {
    return Internal("meta kernels are not registered", "//core/kernels/meta linked (alwayslink)");
  }
  return Internal("CPU kernels are not registered", "//core/kernels/cpu linked (alwayslink)");
}

}  // namespace weft
