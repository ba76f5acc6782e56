// CudaKernelOps: GEMM, layernorm, elementwise (GELU, Add, Scale) and
// attention ops (the Llama layers' are ops_llama.cc). Each checks
// operands, makes the device current, and enqueues on ctx.stream.
#include <cstdlib>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cuda/attention.h"
#include "core/kernels/cuda/cuda_ops.h"
#include "core/kernels/cuda/elementwise.h"
#include "core/kernels/cuda/layernorm.h"
#include "core/kernels/cuda/matmul.h"
#include "core/kernels/cuda/matmul_kernels.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/tensor/cuda/device_guard.h"

namespace weft::cuda {
namespace {

MatmulEpilogue ToMatmulEpilogue(Epilogue e) {
  switch (e) {
    case Epilogue::kNone: return MatmulEpilogue::kNone;
    case Epilogue::kBias: return MatmulEpilogue::kBias;
    case Epilogue::kBiasGelu: return MatmulEpilogue::kBiasGelu;
    case Epilogue::kDGelu: return MatmulEpilogue::kDGelu;
  }
  return MatmulEpilogue::kNone;
}

// dst (cols) += column sums of src (rows, cols); the device is current.
absl::Status ColumnSum(const KernelContext& ctx, const Tensor& dst, const Tensor& src,
                       int64_t rows, int64_t cols) {
  WEFT_ASSIGN_OR_RETURN(Tensor scratch,
                        Scratch(ctx, 4 * ColumnSumScratchFloats(rows, cols)));
  return LaunchColumnSum(dst.raw_data(), dst.dtype(), src.raw_data(), src.dtype(), rows, cols,
                         scratch.data<float>(), StreamOf(ctx));
}

// Where a weight gradient GEMM's bias gradient (GemmArgs::a_col_sums) comes
// from: cuBLASLt's BGRADB epilogue (the default, measured on an H100: one
// extra kernel of cuBLASLt's, into scratch, then added), or, with
// WEFT_BIAS_GRAD=column-sum, our column-sum kernels after the plain GEMM,
// adding straight into the gradient. Read at every call so a benchmark can
// compare both in one process.
absl::StatusOr<bool> BiasGradByColumnSum() {
  const char* v = std::getenv("WEFT_BIAS_GRAD");
  if (v == nullptr || *v == '\0' || std::string_view(v) == "epilogue") return false;
  if (std::string_view(v) == "column-sum") return true;
  return InvalidArgument(absl::StrCat("WEFT_BIAS_GRAD=", v),
                         "epilogue or column-sum (unset for the default, epilogue)");
}

// x (..., C); out like x; mean, rstd f32 (rows); weight, bias (C) in x's dtype.
absl::StatusOr<RowsCols> CheckLayerNorm(const KernelContext& ctx, const Tensor& out,
                                        const Tensor& mean, const Tensor& rstd, const Tensor& x,
                                        const Tensor& weight, const Tensor& bias) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, x, "layernorm x"));
  if (x.ndim() < 1) return InvalidArgument("layernorm x is a scalar", "(..., C)");
  const int64_t c = x.dim(-1);
  const int64_t rows = c == 0 ? 0 : x.numel() / c;
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, out, "layernorm out"));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "layernorm out", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckSameDType(out, "layernorm out", x, "layernorm x"));
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, mean, "layernorm mean", DType::kF32));
  WEFT_RETURN_IF_ERROR(CheckNumel(mean, "layernorm mean", rows));
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, rstd, "layernorm rstd", DType::kF32));
  WEFT_RETURN_IF_ERROR(CheckNumel(rstd, "layernorm rstd", rows));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, weight, "layernorm weight"));
  WEFT_RETURN_IF_ERROR(CheckShape(weight, "layernorm weight", {c}));
  WEFT_RETURN_IF_ERROR(CheckSameDType(weight, "layernorm weight", x, "layernorm x"));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, bias, "layernorm bias"));
  WEFT_RETURN_IF_ERROR(CheckShape(bias, "layernorm bias", {c}));
  WEFT_RETURN_IF_ERROR(CheckSameDType(bias, "layernorm bias", x, "layernorm x"));
  return RowsCols{rows, c};
}

struct QkvDims {
  int64_t b, t, c, nh, hs;
};

absl::StatusOr<QkvDims> CheckQkv(const KernelContext& ctx, const Tensor& qkv, int num_heads) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, qkv, "attention qkv"));
  if (qkv.ndim() != 3 || qkv.dim(2) % 3 != 0) {
    return InvalidArgument("attention qkv has shape " + ShapeString(qkv.shape()), "(B, T, 3*C)");
  }
  QkvDims d{qkv.dim(0), qkv.dim(1), qkv.dim(2) / 3, num_heads, 0};
  if (num_heads <= 0 || d.c % num_heads != 0) {
    return InvalidArgument(absl::StrCat("num_heads=", num_heads, " with C=", d.c),
                           "a positive divisor of C");
  }
  d.hs = d.c / num_heads;
  if (d.hs > kMaxAttentionHeadSize || d.t >= (int64_t{1} << 31)) {
    return InvalidArgument(absl::StrCat("attention head size ", d.hs, " with T=", d.t),
                           absl::StrCat("head size <= ", kMaxAttentionHeadSize, " and T < 2^31"),
                           "use more heads");
  }
  return d;
}

// q (B, Tq, C or 3C), kv (B, Tk, 2C or 3C) with C from out/dout.
absl::StatusOr<BlockAttentionArgs> CheckBlock(const KernelContext& ctx, const Tensor& q,
                                              const TokenChunks& qc, const Tensor& kv,
                                              const TokenChunks& kc, int64_t c, int num_heads) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, q, "block attention q"));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, kv, "block attention kv"));
  WEFT_RETURN_IF_ERROR(CheckSameDType(kv, "block attention kv", q, "block attention q"));
  if (q.ndim() != 3 || (q.dim(2) != c && q.dim(2) != 3 * c)) {
    return InvalidArgument("block attention q has shape " + ShapeString(q.shape()),
                           absl::StrCat("(B, Tq, ", c, ") or (B, Tq, ", 3 * c, ")"));
  }
  if (kv.ndim() != 3 || kv.dim(0) != q.dim(0) || (kv.dim(2) != 2 * c && kv.dim(2) != 3 * c)) {
    return InvalidArgument("block attention kv has shape " + ShapeString(kv.shape()),
                           absl::StrCat("(B, Tk, ", 2 * c, ") or (B, Tk, ", 3 * c, ")"));
  }
  if (num_heads <= 0 || c % num_heads != 0 || c / num_heads > kMaxAttentionHeadSize) {
    return InvalidArgument(absl::StrCat("num_heads=", num_heads, " with C=", c),
                           absl::StrCat("a divisor of C giving head size <= ",
                                        kMaxAttentionHeadSize));
  }
  for (const auto& [ch, t, what] : {std::tuple{qc, q.dim(1), "query"},
                                    std::tuple{kc, kv.dim(1), "key"}}) {
    if (ch.count < 1 || ch.count > TokenChunks::kMaxChunks || ch.chunk_len <= 0 ||
        ch.size() != t) {
      return InvalidArgument(absl::StrCat(what, " chunks: ", ch.count, " of ", ch.chunk_len,
                                          " tokens for a block of ", t),
                             "equal chunks covering the block");
    }
  }
  return BlockAttentionArgs{q.dim(0), q.dim(1), kv.dim(1), num_heads, c / num_heads,
                            q.dim(2),  kv.dim(2), qc,        kc};
}

}  // namespace

absl::Status CudaKernelOps::Gemm(const KernelContext& ctx, const GemmArgs& g) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, g.a, "gemm a"));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, g.b, "gemm b"));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, g.out, "gemm out"));
  WEFT_RETURN_IF_ERROR(CheckSameDType(g.b, "gemm b", g.a, "gemm a"));
  WEFT_ASSIGN_OR_RETURN(const GemmDims dims, CheckGemmArgs(g));
  const int64_t m = dims.m, n = dims.n, k = dims.k;
  MatmulArgs args;
  args.out = g.out.raw_data();
  args.out_dtype = g.out.dtype();
  args.scratch_allocator = ctx.allocator;
  args.a = g.a.raw_data();
  args.b = g.b.raw_data();
  args.ab_dtype = g.a.dtype();
  args.m = m;
  args.n = n;
  args.k = k;
  args.trans_a = g.trans_a;
  args.trans_b = g.trans_b;
  args.accumulate = g.accumulate;
  args.epilogue = ToMatmulEpilogue(g.epilogue);
  if (g.epilogue == Epilogue::kBias || g.epilogue == Epilogue::kBiasGelu) {
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, g.bias, "gemm bias"));
    WEFT_RETURN_IF_ERROR(CheckNumel(g.bias, "gemm bias", n));
    args.bias = g.bias.raw_data();
    args.bias_dtype = g.bias.dtype();
  }
  if (g.epilogue == Epilogue::kBiasGelu || g.epilogue == Epilogue::kDGelu) {
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, g.aux, "gemm aux (pre-gelu)"));
    WEFT_RETURN_IF_ERROR(CheckShape(g.aux, "gemm aux (pre-gelu)", {m, n}));
    WEFT_RETURN_IF_ERROR(CheckSameDType(g.aux, "gemm aux (pre-gelu)", g.out, "gemm out"));
    args.aux = g.aux.raw_data();
  }
  // A bias gradient comes out of cuBLASLt's epilogue (DGELU_BGRAD for
  // kDGelu's column sums of out, BGRADB for a weight gradient's column sums
  // of a). It overwrites, so it goes to scratch and is added: gradients
  // accumulate.
  Tensor grad_dst;  // the gradient the sums add into
  int64_t grad_len = 0;
  if (g.bias_grad.defined()) {  // only with kDGelu (CheckGemmArgs)
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, g.bias_grad, "gemm bias_grad"));
    WEFT_RETURN_IF_ERROR(CheckNumel(g.bias_grad, "gemm bias_grad", n));
    grad_dst = g.bias_grad;
    grad_len = n;
  }
  bool col_sums_after = false;  // a_col_sums from ColumnSum after the GEMM
  if (g.a_col_sums.defined()) {  // only with trans_a and kNone (CheckGemmArgs)
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, g.a_col_sums, "gemm a_col_sums"));
    WEFT_ASSIGN_OR_RETURN(col_sums_after, BiasGradByColumnSum());
    if (!col_sums_after) {
      args.epilogue = MatmulEpilogue::kBiasGradA;
      grad_dst = g.a_col_sums;
      grad_len = m;
    }
  }
  Tensor sums;
  if (grad_dst.defined()) {
    WEFT_ASSIGN_OR_RETURN(sums, Scratch(ctx, 4 * grad_len));
    args.bias_grad = sums.data<float>();
  }
  DeviceGuard guard(ctx.device.index);
  WEFT_RETURN_IF_ERROR(Matmul(ctx.device.index, args, StreamOf(ctx)));
  if (col_sums_after) return ColumnSum(ctx, g.a_col_sums, g.a, k, m);  // a is (K, M)
  if (!grad_dst.defined()) return absl::OkStatus();
  return Add(ctx, grad_dst, grad_dst, sums.View({grad_len}));
}

absl::Status CudaKernelOps::BiasGrad(const KernelContext& ctx, Tensor& dbias, const Tensor& dy) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dy, "bias_grad dy"));
  if (dy.ndim() != 2) return InvalidArgument("bias_grad dy must be 2-D", "(M, N)");
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dbias, "dbias"));
  WEFT_RETURN_IF_ERROR(CheckShape(dbias, "dbias", {dy.dim(1)}));
  DeviceGuard guard(ctx.device.index);
  return ColumnSum(ctx, dbias, dy, dy.dim(0), dy.dim(1));
}

absl::Status CudaKernelOps::LayerNormForward(const KernelContext& ctx, Tensor& out, Tensor& mean,
                                             Tensor& rstd, const Tensor& x,
                                             const Tensor& weight, const Tensor& bias,
                                             float eps) {
  WEFT_ASSIGN_OR_RETURN(RowsCols d, CheckLayerNorm(ctx, out, mean, rstd, x, weight, bias));
  DeviceGuard guard(ctx.device.index);
  return LaunchLayerNormForward(out.raw_data(), mean.data<float>(), rstd.data<float>(),
                                x.raw_data(), weight.raw_data(), bias.raw_data(), x.dtype(),
                                d.rows, d.cols, eps, StreamOf(ctx));
}

absl::Status CudaKernelOps::ResidualLayerNormForward(const KernelContext& ctx,
                                                     Tensor& residual_out, Tensor& out,
                                                     Tensor& mean, Tensor& rstd, const Tensor& a,
                                                     const Tensor& b, const Tensor& weight,
                                                     const Tensor& bias, float eps) {
  WEFT_ASSIGN_OR_RETURN(RowsCols d, CheckLayerNorm(ctx, out, mean, rstd, a, weight, bias));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, b, "residual b"));
  WEFT_RETURN_IF_ERROR(CheckNumel(b, "residual b", a.numel()));
  WEFT_RETURN_IF_ERROR(CheckSameDType(b, "residual b", a, "residual a"));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, residual_out, "residual out"));
  WEFT_RETURN_IF_ERROR(CheckNumel(residual_out, "residual out", a.numel()));
  WEFT_RETURN_IF_ERROR(CheckSameDType(residual_out, "residual out", a, "residual a"));
  DeviceGuard guard(ctx.device.index);
  return LaunchResidualLayerNormForward(residual_out.raw_data(), out.raw_data(),
                                        mean.data<float>(), rstd.data<float>(), a.raw_data(),
                                        b.raw_data(), weight.raw_data(), bias.raw_data(),
                                        a.dtype(), d.rows, d.cols, eps, StreamOf(ctx));
}

absl::Status CudaKernelOps::LayerNormBackward(const KernelContext& ctx, Tensor& dx,
                                              Tensor& dweight, Tensor& dbias, const Tensor& dy,
                                              const Tensor& x, const Tensor& weight,
                                              const Tensor& mean, const Tensor& rstd,
                                              const Tensor& residual) {
  // dy plays out's role (same shape and dtype as x); weight is the bias slot.
  WEFT_ASSIGN_OR_RETURN(RowsCols d, CheckLayerNorm(ctx, dy, mean, rstd, x, weight, weight));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dx, "layernorm dx"));
  WEFT_RETURN_IF_ERROR(CheckNumel(dx, "layernorm dx", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckSameDType(dx, "layernorm dx", x, "layernorm x"));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dweight, "layernorm dweight"));
  WEFT_RETURN_IF_ERROR(CheckShape(dweight, "layernorm dweight", {d.cols}));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dbias, "layernorm dbias"));
  WEFT_RETURN_IF_ERROR(CheckShape(dbias, "layernorm dbias", {d.cols}));
  WEFT_RETURN_IF_ERROR(CheckSameDType(dbias, "layernorm dbias", dweight, "layernorm dweight"));
  if (residual.defined()) {
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, residual, "layernorm residual"));
    WEFT_RETURN_IF_ERROR(CheckNumel(residual, "layernorm residual", x.numel()));
    WEFT_RETURN_IF_ERROR(CheckSameDType(residual, "layernorm residual", x, "layernorm x"));
  }
  if (d.cols > LayerNormBackwardMaxChannels()) {
    return InvalidArgument(absl::StrCat("layernorm backward on CUDA with C = ", d.cols),
                           absl::StrCat("C <= ", LayerNormBackwardMaxChannels()),
                           "each warp keeps dweight/dbias partials for a whole row in shared "
                           "memory; split the normalized dimension or run it on the CPU");
  }
  DeviceGuard guard(ctx.device.index);
  WEFT_ASSIGN_OR_RETURN(Tensor scratch,
                        Scratch(ctx, 4 * LayerNormBackwardScratchFloats(d.rows, d.cols)));
  return LaunchLayerNormBackward(
      dx.raw_data(), dweight.raw_data(), dbias.raw_data(), dweight.dtype(), dy.raw_data(),
      residual.defined() ? residual.raw_data() : nullptr, x.raw_data(), weight.raw_data(),
      mean.data<float>(), rstd.data<float>(), x.dtype(), d.rows, d.cols, scratch.data<float>(),
      StreamOf(ctx));
}

absl::Status CudaKernelOps::GeluForward(const KernelContext& ctx, Tensor& out, const Tensor& x) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, x, "gelu x"));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, out, "gelu out"));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "gelu out", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckSameDType(out, "gelu out", x, "gelu x"));
  DeviceGuard guard(ctx.device.index);
  return LaunchGeluForward(out.raw_data(), x.raw_data(), x.dtype(), x.numel(), StreamOf(ctx));
}

absl::Status CudaKernelOps::GeluBackward(const KernelContext& ctx, Tensor& dx, const Tensor& dy,
                                         const Tensor& x) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, x, "gelu x"));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dy, "gelu dy"));
  WEFT_RETURN_IF_ERROR(CheckNumel(dy, "gelu dy", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckSameDType(dy, "gelu dy", x, "gelu x"));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dx, "gelu dx"));
  WEFT_RETURN_IF_ERROR(CheckNumel(dx, "gelu dx", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckSameDType(dx, "gelu dx", x, "gelu x"));
  DeviceGuard guard(ctx.device.index);
  return LaunchGeluBackward(dx.raw_data(), dy.raw_data(), x.raw_data(), x.dtype(), x.numel(),
                            StreamOf(ctx));
}

absl::Status CudaKernelOps::Add(const KernelContext& ctx, Tensor& out, const Tensor& a,
                                const Tensor& b) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, a, "add a"));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, b, "add b"));
  WEFT_RETURN_IF_ERROR(CheckNumel(b, "add b", a.numel()));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, out, "add out"));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "add out", a.numel()));
  DeviceGuard guard(ctx.device.index);
  return LaunchAdd(out.raw_data(), out.dtype(), a.raw_data(), a.dtype(), b.raw_data(), b.dtype(),
                   a.numel(), StreamOf(ctx));
}

absl::Status CudaKernelOps::Scale(const KernelContext& ctx, Tensor& x, float scale) {
  WEFT_RETURN_IF_ERROR(CheckContext(ctx));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, x, "scale x"));
  DeviceGuard guard(ctx.device.index);
  return LaunchScale(x.raw_data(), x.dtype(), scale, x.numel(), StreamOf(ctx));
}

absl::Status CudaKernelOps::AttentionForward(const KernelContext& ctx, Tensor& out, Tensor& lse,
                                             const Tensor& qkv, int num_heads) {
  WEFT_ASSIGN_OR_RETURN(QkvDims d, CheckQkv(ctx, qkv, num_heads));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, out, "attention out"));
  WEFT_RETURN_IF_ERROR(CheckShape(out, "attention out", {d.b, d.t, d.c}));
  WEFT_RETURN_IF_ERROR(CheckSameDType(out, "attention out", qkv, "attention qkv"));
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, lse, "attention lse", DType::kF32));
  WEFT_RETURN_IF_ERROR(CheckShape(lse, "attention lse", {d.b, d.nh, d.t}));
  DeviceGuard guard(ctx.device.index);
  return LaunchAttentionForward(out.raw_data(), lse.data<float>(), qkv.raw_data(), qkv.dtype(),
                                d.b, d.t, d.nh, d.hs, StreamOf(ctx));
}

absl::Status CudaKernelOps::AttentionBackward(const KernelContext& ctx, Tensor& dqkv,
                                              const Tensor& dout, const Tensor& qkv,
                                              const Tensor& out, const Tensor& lse,
                                              int num_heads) {
  WEFT_ASSIGN_OR_RETURN(QkvDims d, CheckQkv(ctx, qkv, num_heads));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dqkv, "attention dqkv"));
  WEFT_RETURN_IF_ERROR(CheckShape(dqkv, "attention dqkv", {d.b, d.t, 3 * d.c}));
  WEFT_RETURN_IF_ERROR(CheckSameDType(dqkv, "attention dqkv", qkv, "attention qkv"));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dout, "attention dout"));
  WEFT_RETURN_IF_ERROR(CheckShape(dout, "attention dout", {d.b, d.t, d.c}));
  WEFT_RETURN_IF_ERROR(CheckSameDType(dout, "attention dout", qkv, "attention qkv"));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, out, "attention out"));
  WEFT_RETURN_IF_ERROR(CheckShape(out, "attention out", {d.b, d.t, d.c}));
  WEFT_RETURN_IF_ERROR(CheckSameDType(out, "attention out", qkv, "attention qkv"));
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, lse, "attention lse", DType::kF32));
  WEFT_RETURN_IF_ERROR(CheckShape(lse, "attention lse", {d.b, d.nh, d.t}));
  DeviceGuard guard(ctx.device.index);
  WEFT_ASSIGN_OR_RETURN(const int64_t scratch_floats,
                        AttentionBackwardScratchFloats(qkv.dtype(), d.b, d.t, d.nh, d.hs));
  WEFT_ASSIGN_OR_RETURN(Tensor scratch, Scratch(ctx, 4 * scratch_floats));
  return LaunchAttentionBackward(dqkv.raw_data(), dout.raw_data(), qkv.raw_data(),
                                 out.raw_data(), lse.data<float>(), qkv.dtype(), d.b, d.t, d.nh,
                                 d.hs, scratch.data<float>(), scratch_floats, StreamOf(ctx));
}

absl::Status CudaKernelOps::AttentionBlockForward(const KernelContext& ctx, Tensor& out,
                                                  Tensor& lse, const Tensor& q,
                                                  const TokenChunks& q_chunks, const Tensor& kv,
                                                  const TokenChunks& kv_chunks, int num_heads,
                                                  bool accumulate) {
  if (out.ndim() != 3) {
    return InvalidArgument("block attention out has shape " + ShapeString(out.shape()),
                           "(B, Tq, C)");
  }
  WEFT_ASSIGN_OR_RETURN(BlockAttentionArgs a,
                        CheckBlock(ctx, q, q_chunks, kv, kv_chunks, out.dim(2), num_heads));
  WEFT_RETURN_IF_ERROR(CheckFloat(ctx, out, "block attention out"));
  WEFT_RETURN_IF_ERROR(CheckShape(out, "block attention out", {a.b, a.tq, a.nh * a.hs}));
  WEFT_RETURN_IF_ERROR(CheckSameDType(out, "block attention out", q, "block attention q"));
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, lse, "block attention lse", DType::kF32));
  WEFT_RETURN_IF_ERROR(CheckShape(lse, "block attention lse", {a.b, a.nh, a.tq}));
  DeviceGuard guard(ctx.device.index);
  return LaunchAttentionBlockForward(out.raw_data(), lse.data<float>(), q.raw_data(),
                                     kv.raw_data(), q.dtype(), a, accumulate, StreamOf(ctx));
}

absl::Status CudaKernelOps::AttentionBlockBackward(const KernelContext& ctx, Tensor& dq,
                                                   Tensor& dkv, const Tensor& dout,
                                                   const Tensor& q, const TokenChunks& q_chunks,
                                                   const Tensor& kv, const TokenChunks& kv_chunks,
                                                   const Tensor& out, const Tensor& lse,
                                                   int num_heads) {
  if (dout.ndim() != 3) {
    return InvalidArgument("block attention dout has shape " + ShapeString(dout.shape()),
                           "(B, Tq, C)");
  }
  WEFT_ASSIGN_OR_RETURN(BlockAttentionArgs a,
                        CheckBlock(ctx, q, q_chunks, kv, kv_chunks, dout.dim(2), num_heads));
  const int64_t c = a.nh * a.hs;
  for (const auto& [t, name] : {std::pair<const Tensor*, const char*>{&dout, "dout"},
                                {&out, "out"}}) {
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, *t, name));
    WEFT_RETURN_IF_ERROR(CheckShape(*t, name, {a.b, a.tq, c}));
    WEFT_RETURN_IF_ERROR(CheckSameDType(*t, name, q, "block attention q"));
  }
  WEFT_RETURN_IF_ERROR(CheckShape(dq, "block attention dq", {a.b, a.tq, a.q_width}));
  WEFT_RETURN_IF_ERROR(CheckSameDType(dq, "block attention dq", q, "block attention q"));
  WEFT_RETURN_IF_ERROR(CheckShape(dkv, "block attention dkv", {a.b, a.tk, a.kv_width}));
  WEFT_RETURN_IF_ERROR(CheckSameDType(dkv, "block attention dkv", q, "block attention q"));
  WEFT_RETURN_IF_ERROR(CheckDType(ctx, lse, "block attention lse", DType::kF32));
  WEFT_RETURN_IF_ERROR(CheckShape(lse, "block attention lse", {a.b, a.nh, a.tq}));
  DeviceGuard guard(ctx.device.index);
  WEFT_ASSIGN_OR_RETURN(Tensor scratch, Scratch(ctx, 4 * a.b * a.nh * a.tq));
  return LaunchAttentionBlockBackward(dq.raw_data(), dkv.raw_data(), dout.raw_data(),
                                      q.raw_data(), kv.raw_data(), out.raw_data(),
                                      lse.data<float>(), q.dtype(), a, scratch.data<float>(),
                                      StreamOf(ctx));
}

}  // namespace weft::cuda
