// CudaKernelOps: the Llama layers' ops (RMSNorm, SwiGLU, rotary embedding
// with grouped-query packing). Each checks operands, makes the device
// current, and enqueues on ctx.stream.
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cuda/cuda_ops.h"
#include "core/kernels/cuda/elementwise.h"
#include "core/kernels/cuda/layernorm.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/kernels/cuda/rope.h"
#include "core/tensor/cuda/device_guard.h"

namespace weft::cuda {
namespace {

// x (..., C); out like x; rstd f32 (rows); weight (C) in x's dtype.
absl::StatusOr<RowsCols> CheckRmsNorm(const KernelContext& ctx, const Tensor& out,
                                      const Tensor& rstd, const Tensor& x,
                                      const Tensor& weight) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, x, "rmsnorm x"));
  if (x.ndim() < 1) return InvalidArgument("rmsnorm x is a scalar", "(..., C)");
  const int64_t c = x.dim(-1);
  const int64_t rows = c == 0 ? 0 : x.numel() / c;
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, out, "rmsnorm out"));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "rmsnorm out", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckSameDType(out, "rmsnorm out", x, "rmsnorm x"));
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, rstd, "rmsnorm rstd", DType::kF32));
  WEFT_RETURN_IF_ERROR(CheckNumel(rstd, "rmsnorm rstd", rows));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, weight, "rmsnorm weight"));
  WEFT_RETURN_IF_ERROR(CheckShape(weight, "rmsnorm weight", {c}));
  WEFT_RETURN_IF_ERROR(CheckSameDType(weight, "rmsnorm weight", x, "rmsnorm x"));
  return RowsCols{rows, c};
}

// gate_up (..., 2H); returns (rows, H).
absl::StatusOr<RowsCols> CheckGateUp(const KernelContext& ctx, const Tensor& gate_up) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, gate_up, "swiglu gate_up"));
  if (gate_up.ndim() < 1 || gate_up.dim(-1) % 2 != 0) {
    return InvalidArgument("swiglu gate_up has shape " + ShapeString(gate_up.shape()),
                           "(..., 2H): gate in columns [0, H), up in [H, 2H)");
  }
  const int64_t h = gate_up.dim(-1) / 2;
  return RowsCols{h == 0 ? 0 : gate_up.numel() / (2 * h), h};
}

// The q side (B, T, H*D) and K/V side (B, T, G*D) of RopeQkv, packed
// (B, T, 3*H*D), with D from rope (P, D); the positions cover T and lie in
// [0, P). grad names the operands as the backward's gradients.
absl::StatusOr<RopeDims> CheckRope(const KernelContext& ctx, const Tensor& qkv, const Tensor& q,
                                   const Tensor& k, const Tensor& v, const Tensor& rope,
                                   const TokenChunks& positions, bool grad) {
  const char* const qkv_name = grad ? "rope dqkv" : "rope qkv";
  const char* const q_name = grad ? "rope dq" : "rope q";
  const char* const k_name = grad ? "rope dk" : "rope k";
  const char* const v_name = grad ? "rope dv" : "rope v";
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, rope, "rope table", DType::kF32));
  if (rope.ndim() != 2 || rope.dim(1) <= 0 || rope.dim(1) % 2 != 0) {
    return InvalidArgument("rope table has shape " + ShapeString(rope.shape()),
                           "(P, D) with D even: cos then sin of each position's D/2 angles");
  }
  const int64_t p = rope.dim(0), d = rope.dim(1);
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, q, q_name));
  if (q.ndim() != 3 || q.dim(2) == 0 || q.dim(2) % d != 0) {
    return InvalidArgument(absl::StrCat(q_name, " has shape ", ShapeString(q.shape())),
                           absl::StrCat("(B, T, H*D) with D = ", d, " (the rope table's)"));
  }
  RopeDims dims{q.dim(0), q.dim(1), q.dim(2) / d, 0, d};
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, k, k_name));
  WEFT_RETURN_IF_ERROR(CheckSameDType(k, k_name, q, q_name));
  if (k.ndim() != 3 || k.dim(0) != dims.b || k.dim(1) != dims.t || k.dim(2) == 0 ||
      k.dim(2) % d != 0 || dims.h % (k.dim(2) / d) != 0) {
    return InvalidArgument(absl::StrCat(k_name, " has shape ", ShapeString(k.shape()), " with ",
                                        dims.h, " query heads of size ", d),
                           absl::StrCat("(", dims.b, ", ", dims.t,
                                        ", G*D) with G K/V heads dividing the query heads"));
  }
  dims.g = k.dim(2) / d;
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, v, v_name));
  WEFT_RETURN_IF_ERROR(CheckShape(v, v_name, {dims.b, dims.t, dims.g * d}));
  WEFT_RETURN_IF_ERROR(CheckSameDType(v, v_name, q, q_name));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, qkv, qkv_name));
  WEFT_RETURN_IF_ERROR(CheckShape(qkv, qkv_name, {dims.b, dims.t, 3 * dims.h * d}));
  WEFT_RETURN_IF_ERROR(CheckSameDType(qkv, qkv_name, q, q_name));
  const TokenChunks& pc = positions;
  if (pc.count < 1 || pc.count > TokenChunks::kMaxChunks || pc.chunk_len <= 0 ||
      pc.size() != dims.t) {
    return InvalidArgument(absl::StrCat("rope positions: ", pc.count, " chunks of ", pc.chunk_len,
                                        " tokens for T = ", dims.t),
                           "equal chunks covering the T tokens");
  }
  for (int i = 0; i < pc.count; ++i) {
    if (pc.offsets[i] < 0 || pc.offsets[i] + pc.chunk_len > p) {
      return InvalidArgument(
          absl::StrCat("rope positions [", pc.offsets[i], ", ", pc.offsets[i] + pc.chunk_len,
                       ") with a table of ", p, " positions"),
          "positions in [0, P)", "build the rope table for the longest sequence");
    }
  }
  return dims;
}

}  // namespace

absl::Status CudaKernelOps::RmsNormForward(const KernelContext& ctx, Tensor& residual_out,
                                           Tensor& out, Tensor& rstd, const Tensor& a,
                                           const Tensor& b, const Tensor& weight, float eps) {
  WEFT_ASSIGN_OR_RETURN(RowsCols d, CheckRmsNorm(ctx, out, rstd, a, weight));
  if (b.defined()) {
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, b, "rmsnorm residual b"));
    WEFT_RETURN_IF_ERROR(CheckNumel(b, "rmsnorm residual b", a.numel()));
    WEFT_RETURN_IF_ERROR(CheckSameDType(b, "rmsnorm residual b", a, "rmsnorm x"));
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, residual_out, "rmsnorm residual out"));
    WEFT_RETURN_IF_ERROR(CheckNumel(residual_out, "rmsnorm residual out", a.numel()));
    WEFT_RETURN_IF_ERROR(
        CheckSameDType(residual_out, "rmsnorm residual out", a, "rmsnorm x"));
  }
  DeviceGuard guard(ctx.device.index);
  return LaunchRmsNormForward(b.defined() ? residual_out.raw_data() : nullptr, out.raw_data(),
                              rstd.data<float>(), a.raw_data(),
                              b.defined() ? b.raw_data() : nullptr, weight.raw_data(), a.dtype(),
                              d.rows, d.cols, eps, StreamOf(ctx));
}

absl::Status CudaKernelOps::RmsNormBackward(const KernelContext& ctx, Tensor& dx,
                                            Tensor& dweight, const Tensor& dy, const Tensor& x,
                                            const Tensor& weight, const Tensor& rstd,
                                            const Tensor& residual) {
  // dy plays out's role (same shape and dtype as x).
  WEFT_ASSIGN_OR_RETURN(RowsCols d, CheckRmsNorm(ctx, dy, rstd, x, weight));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dx, "rmsnorm dx"));
  WEFT_RETURN_IF_ERROR(CheckNumel(dx, "rmsnorm dx", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckSameDType(dx, "rmsnorm dx", x, "rmsnorm x"));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dweight, "rmsnorm dweight"));
  WEFT_RETURN_IF_ERROR(CheckShape(dweight, "rmsnorm dweight", {d.cols}));
  if (residual.defined()) {
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, residual, "rmsnorm residual"));
    WEFT_RETURN_IF_ERROR(CheckNumel(residual, "rmsnorm residual", x.numel()));
    WEFT_RETURN_IF_ERROR(CheckSameDType(residual, "rmsnorm residual", x, "rmsnorm x"));
  }
  if (d.cols > RmsNormBackwardMaxChannels()) {
    return InvalidArgument(absl::StrCat("rmsnorm backward on CUDA with C = ", d.cols),
                           absl::StrCat("C <= ", RmsNormBackwardMaxChannels()),
                           "each warp keeps dweight partials for a whole row in shared memory; "
                           "split the normalized dimension or run it on the CPU");
  }
  DeviceGuard guard(ctx.device.index);
  WEFT_ASSIGN_OR_RETURN(Tensor scratch,
                        Scratch(ctx, 4 * RmsNormBackwardScratchFloats(d.rows, d.cols)));
  return LaunchRmsNormBackward(dx.raw_data(), dweight.raw_data(), dweight.dtype(), dy.raw_data(),
                               residual.defined() ? residual.raw_data() : nullptr, x.raw_data(),
                               weight.raw_data(), rstd.data<float>(), x.dtype(), d.rows, d.cols,
                               scratch.data<float>(), StreamOf(ctx));
}

absl::Status CudaKernelOps::SwiGluForward(const KernelContext& ctx, Tensor& out,
                                          const Tensor& gate_up) {
  WEFT_ASSIGN_OR_RETURN(RowsCols d, CheckGateUp(ctx, gate_up));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, out, "swiglu out"));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "swiglu out", d.rows * d.cols));
  WEFT_RETURN_IF_ERROR(CheckSameDType(out, "swiglu out", gate_up, "swiglu gate_up"));
  DeviceGuard guard(ctx.device.index);
  return LaunchSwiGluForward(out.raw_data(), gate_up.raw_data(), gate_up.dtype(), d.rows, d.cols,
                             StreamOf(ctx));
}

absl::Status CudaKernelOps::SwiGluBackward(const KernelContext& ctx, Tensor& dgate_up,
                                           const Tensor& dout, const Tensor& gate_up) {
  WEFT_ASSIGN_OR_RETURN(RowsCols d, CheckGateUp(ctx, gate_up));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dout, "swiglu dout"));
  WEFT_RETURN_IF_ERROR(CheckNumel(dout, "swiglu dout", d.rows * d.cols));
  WEFT_RETURN_IF_ERROR(CheckSameDType(dout, "swiglu dout", gate_up, "swiglu gate_up"));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dgate_up, "swiglu dgate_up"));
  WEFT_RETURN_IF_ERROR(CheckNumel(dgate_up, "swiglu dgate_up", gate_up.numel()));
  WEFT_RETURN_IF_ERROR(CheckSameDType(dgate_up, "swiglu dgate_up", gate_up, "swiglu gate_up"));
  DeviceGuard guard(ctx.device.index);
  return LaunchSwiGluBackward(dgate_up.raw_data(), dout.raw_data(), gate_up.raw_data(),
                              gate_up.dtype(), d.rows, d.cols, StreamOf(ctx));
}

absl::Status CudaKernelOps::RopeQkvForward(const KernelContext& ctx, Tensor& qkv, const Tensor& q,
                                           const Tensor& k, const Tensor& v, const Tensor& rope,
                                           const TokenChunks& positions) {
  WEFT_ASSIGN_OR_RETURN(RopeDims d, CheckRope(ctx, qkv, q, k, v, rope, positions, false));
  DeviceGuard guard(ctx.device.index);
  return LaunchRopeQkvForward(qkv.raw_data(), q.raw_data(), k.raw_data(), v.raw_data(),
                              rope.data<float>(), positions, q.dtype(), d, StreamOf(ctx));
}

absl::Status CudaKernelOps::RopeQkvBackward(const KernelContext& ctx, Tensor& dq, Tensor& dk,
                                            Tensor& dv, const Tensor& dqkv, const Tensor& rope,
                                            const TokenChunks& positions) {
  WEFT_ASSIGN_OR_RETURN(RopeDims d, CheckRope(ctx, dqkv, dq, dk, dv, rope, positions, true));
  DeviceGuard guard(ctx.device.index);
  return LaunchRopeQkvBackward(dq.raw_data(), dk.raw_data(), dv.raw_data(), dqkv.raw_data(),
                               rope.data<float>(), positions, dq.dtype(), d, StreamOf(ctx));
}

}  // namespace weft::cuda
