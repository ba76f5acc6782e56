// GEMM through OpenBLAS (row-major sgemm) with the epilogues applied in a
// second pass over the output.
#include <cblas.h>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/cpu_ops.h"
#include "core/kernels/cpu/gelu_math.h"

namespace weft::cpu {

absl::Status CpuKernelOps::Gemm(const KernelContext&, const GemmArgs& g) {
  WEFT_RETURN_IF_ERROR(CheckCpu(g.a, "gemm a"));
  WEFT_RETURN_IF_ERROR(CheckCpu(g.b, "gemm b"));
  WEFT_RETURN_IF_ERROR(CheckCpu(g.out, "gemm out"));
  WEFT_ASSIGN_OR_RETURN(const GemmDims dims, CheckGemmArgs(g));
  const int64_t m = dims.m, n = dims.n, k = dims.k;
  Tensor out = g.out;  // shares storage; the epilogue writes through it
  float* c = out.data<float>();
  if (m > 0 && n > 0) {
    if (k == 0) {
      if (!g.accumulate) std::fill(c, c + m * n, 0.f);
    } else {
      cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                  g.trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
                  static_cast<int>(n), static_cast<int>(k), 1.0f, g.a.data<float>(),
                  static_cast<int>(g.a.dim(1)), g.b.data<float>(), static_cast<int>(g.b.dim(1)),
                  g.accumulate ? 1.0f : 0.0f, c, static_cast<int>(n));
    }
  }
  switch (g.epilogue) {
    case Epilogue::kNone:
      if (g.a_col_sums.defined()) {
        Tensor sums = g.a_col_sums;
        return BiasGrad(KernelContext{Device::Cpu()}, sums, g.a);  // a is (K, M)
      }
      return absl::OkStatus();
    case Epilogue::kBias: {
      WEFT_RETURN_IF_ERROR(CheckShape(g.bias, "gemm bias", {n}));
      const float* bias = g.bias.data<float>();
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) c[i * n + j] += bias[j];
      }
      return absl::OkStatus();
    }
    case Epilogue::kBiasGelu: {
      WEFT_RETURN_IF_ERROR(CheckShape(g.bias, "gemm bias", {n}));
      WEFT_RETURN_IF_ERROR(CheckShape(g.aux, "gemm aux (pre-gelu)", {m, n}));
      const float* bias = g.bias.data<float>();
      float* aux = g.aux.data<float>();
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          const float pre = c[i * n + j] + bias[j];
          aux[i * n + j] = pre;
          c[i * n + j] = Gelu(pre);
        }
      }
      return absl::OkStatus();
    }
    case Epilogue::kDGelu: {
      WEFT_RETURN_IF_ERROR(CheckShape(g.aux, "gemm aux (pre-gelu)", {m, n}));
      const float* aux = g.aux.data<float>();
      for (int64_t i = 0; i < m * n; ++i) c[i] *= GeluGrad(aux[i]);
      if (g.bias_grad.defined()) {
        Tensor bias_grad = g.bias_grad;
        return BiasGrad(KernelContext{Device::Cpu()}, bias_grad, out);
      }
      return absl::OkStatus();
    }
  }
  return Internal("unknown epilogue");
}

void CpuKernelOps::SetNumThreads(int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}

absl::Status CpuKernelOps::BiasGrad(const KernelContext&, Tensor& dbias, const Tensor& dy) {
  WEFT_RETURN_IF_ERROR(CheckCpu(dy, "bias_grad dy"));
  if (dy.ndim() != 2) return InvalidArgument("bias_grad dy must be 2-D", "(M, N)");
  const int64_t m = dy.dim(0), n = dy.dim(1);
  WEFT_RETURN_IF_ERROR(CheckShape(dbias, "dbias", {n}));
  const float* g = dy.data<float>();
  float* db = dbias.data<float>();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) db[j] += g[i * n + j];
  }
  return absl::OkStatus();
}

}  // namespace weft::cpu
