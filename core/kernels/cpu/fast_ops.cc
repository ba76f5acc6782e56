// Production CPU kernels; see fast_ops.h for the design and
// cpu_ops.h / the other .cc files here for the reference semantics.
#include "core/kernels/cpu/fast_ops.h"

#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/fast_math.h"
#include "core/kernels/cpu/gelu_math.h"
#include "core/kernels/cpu/thread_pool.h"

namespace weft::cpu {
namespace {

using namespace ::weft::cpu::fast;  // NOLINT: this unit's vector helpers

// ---- elementwise -----------------------------------------------------------

WEFT_CLONES void GeluRange(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = GeluF(x[i]);
}
WEFT_CLONES void GeluGradRange(float* dx, const float* dy, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * GeluGradF(x[i]);
}
WEFT_CLONES void AddRange(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// ---- GEMM epilogues on a block of rows ---------------------------------------

WEFT_CLONES void BiasRows(float* c, const float* bias, int64_t rows, int64_t n) {
  for (int64_t i = 0; i < rows; ++i) {
    float* ci = c + i * n;
    for (int64_t j = 0; j < n; ++j) ci[j] += bias[j];
  }
}
WEFT_CLONES void BiasGeluRows(float* c, float* aux, const float* bias, int64_t rows, int64_t n) {
  for (int64_t i = 0; i < rows; ++i) {
    float* ci = c + i * n;
    float* ai = aux + i * n;
    for (int64_t j = 0; j < n; ++j) {
      const float pre = ci[j] + bias[j];
      ai[j] = pre;
      ci[j] = GeluF(pre);
    }
  }
}
WEFT_CLONES void DGeluRows(float* c, const float* aux, int64_t count) {
  for (int64_t i = 0; i < count; ++i) c[i] *= GeluGradF(aux[i]);
}
// db[j] += sum_i g[i, j] for j in [j0, j1), rows in order (as the reference).
WEFT_CLONES void ColumnSums(float* db, const float* g, int64_t m, int64_t n, int64_t j0,
                            int64_t j1) {
  for (int64_t i = 0; i < m; ++i) {
    const float* gi = g + i * n;
    for (int64_t j = j0; j < j1; ++j) db[j] += gi[j];
  }
}

// ---- cross-entropy -----------------------------------------------------------

WEFT_CLONES void CrossEntropyRows(float* loss, float* pl, const int32_t* tg, int64_t r0,
                                  int64_t r1, int64_t vp, int64_t vocab, float dloss_scale,
                                  bool compute_grad, float* tmp) {
  for (int64_t r = r0; r < r1; ++r) {
    float* z = pl + r * vp;
    const int32_t y = tg[r];
    if (y < 0) {
      loss[r] = 0;
      if (compute_grad) std::fill(z, z + vp, 0.f);
      continue;
    }
    const float mx = MaxF(z, vocab);
    const float zy = z[y];
    float* e = compute_grad ? z : tmp;
    for (int64_t j = 0; j < vocab; ++j) e[j] = ExpF(z[j] - mx);
    const float sum = SumF(e, vocab);
    loss[r] = -(zy - mx - std::log(sum));
    if (compute_grad) {
      const float k = dloss_scale / sum;
      for (int64_t j = 0; j < vocab; ++j) z[j] *= k;
      z[y] -= dloss_scale;
      for (int64_t j = vocab; j < vp; ++j) z[j] = 0;
    }
  }
}

// ---- optimizer / norms ---------------------------------------------------------

struct AdamConst {
  float b1, b2, bc1, bc2, lr, eps, decay, gscale;
};

// The reference's arithmetic in the reference's order: bitwise identical.
WEFT_CLONES void AdamWRange(float* w, float* m, float* v, const float* grad, float* param,
                            int64_t n, AdamConst k) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * k.gscale;
    m[i] = k.b1 * m[i] + (1.0f - k.b1) * g;
    v[i] = k.b2 * v[i] + (1.0f - k.b2) * g * g;
    const float mhat = m[i] / k.bc1, vhat = v[i] / k.bc2;
    w[i] -= k.lr * (mhat / (std::sqrt(vhat) + k.eps) + k.decay * w[i]);
  }
  if (param != nullptr) std::memcpy(param, w, n * sizeof(float));
}

WEFT_CLONES double SumSquaresF(const float* x, int64_t n) {
  double acc[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int l = 0; l < 4; ++l) acc[l] += double(x[i + l]) * double(x[i + l]);
  }
  double s = (acc[0] + acc[2]) + (acc[1] + acc[3]);
  for (; i < n; ++i) s += double(x[i]) * double(x[i]);
  return s;
}

// Fixed-size blocks so chunking (and so the sum) does not depend on threads.
constexpr int64_t kSumBlock = 16384;

}  // namespace

FastCpuKernelOps::FastCpuKernelOps() = default;

void FastCpuKernelOps::SetNumThreads(int threads) { SetKernelThreads(threads); }

absl::Status FastCpuKernelOps::Gemm(const KernelContext& ctx, const GemmArgs& g) {
  WEFT_RETURN_IF_ERROR(CheckCpu(g.a, "gemm a"));
  WEFT_RETURN_IF_ERROR(CheckCpu(g.b, "gemm b"));
  WEFT_RETURN_IF_ERROR(CheckCpu(g.out, "gemm out"));
  WEFT_ASSIGN_OR_RETURN(const GemmDims dims, CheckGemmArgs(g));
  const int64_t m = dims.m, n = dims.n, k = dims.k;
  if (k == 0 || m == 0 || n == 0) return CpuKernelOps::Gemm(ctx, g);
  if (g.epilogue == Epilogue::kBias || g.epilogue == Epilogue::kBiasGelu) {
    WEFT_RETURN_IF_ERROR(CheckShape(g.bias, "gemm bias", {n}));
  }
  if (g.epilogue == Epilogue::kBiasGelu || g.epilogue == Epilogue::kDGelu) {
    WEFT_RETURN_IF_ERROR(CheckShape(g.aux, "gemm aux (pre-gelu)", {m, n}));
  }
  if (g.bias_grad.defined()) {
    WEFT_RETURN_IF_ERROR(CheckShape(g.bias_grad, "dbias", {n}));
  }
  if (g.a_col_sums.defined()) {
    WEFT_RETURN_IF_ERROR(CheckShape(g.a_col_sums, "gemm a_col_sums", {m}));
  }
  float* a_sums = g.a_col_sums.defined() ? g.a_col_sums.data<float>() : nullptr;
  float* c = g.out.data<float>();
  const float* a = g.a.data<float>();
  const float* b = g.b.data<float>();
  const int lda = static_cast<int>(g.a.dim(1)), ldb = static_cast<int>(g.b.dim(1));
  const float beta = g.accumulate ? 1.0f : 0.0f;
  const float* bias = g.bias.defined() ? g.bias.data<float>() : nullptr;
  float* aux = g.aux.defined() ? g.aux.data<float>() : nullptr;
  const Epilogue epi = g.epilogue;
  // Each chunk of output rows: its sgemm, then its epilogue while in cache.
  // Rows per chunk >= 16 so the single-threaded sgemm stays efficient.
  ParallelFor(m, 16, [&](int64_t r0, int64_t r1) {
    const int64_t rows = r1 - r0;
    const float* ar = g.trans_a ? a + r0 : a + r0 * lda;
    cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                g.trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(rows),
                static_cast<int>(n), static_cast<int>(k), 1.0f, ar, lda, b, ldb, beta,
                c + r0 * n, static_cast<int>(n));
    // a is (K, M) here (trans_a): this chunk's rows of out are its columns.
    if (a_sums != nullptr) ColumnSums(a_sums, a, k, lda, r0, r1);
    switch (epi) {
      case Epilogue::kNone:
        break;
      case Epilogue::kBias:
        BiasRows(c + r0 * n, bias, rows, n);
        break;
      case Epilogue::kBiasGelu:
        BiasGeluRows(c + r0 * n, aux + r0 * n, bias, rows, n);
        break;
      case Epilogue::kDGelu:
        DGeluRows(c + r0 * n, aux + r0 * n, rows * n);
        break;
    }
  });
  if (epi == Epilogue::kDGelu && g.bias_grad.defined()) {
    float* db = g.bias_grad.data<float>();
    ParallelFor(n, 64, [&](int64_t j0, int64_t j1) { ColumnSums(db, c, m, n, j0, j1); });
  }
  return absl::OkStatus();
}

absl::Status FastCpuKernelOps::BiasGrad(const KernelContext&, Tensor& dbias, const Tensor& dy) {
  WEFT_RETURN_IF_ERROR(CheckCpu(dy, "bias_grad dy"));
  if (dy.ndim() != 2) return InvalidArgument("bias_grad dy must be 2-D", "(M, N)");
  const int64_t m = dy.dim(0), n = dy.dim(1);
  WEFT_RETURN_IF_ERROR(CheckShape(dbias, "dbias", {n}));
  const float* g = dy.data<float>();
  float* db = dbias.data<float>();
  ParallelFor(n, 64, [&](int64_t j0, int64_t j1) { ColumnSums(db, g, m, n, j0, j1); });
  return absl::OkStatus();
}

absl::Status FastCpuKernelOps::GeluForward(const KernelContext&, Tensor& out, const Tensor& x) {
  WEFT_RETURN_IF_ERROR(CheckCpu(x, "gelu x"));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "gelu out", x.numel()));
  const float* px = x.data<float>();
  float* po = out.data<float>();
  ParallelFor(x.numel(), 4096,
              [&](int64_t i0, int64_t i1) { GeluRange(po + i0, px + i0, i1 - i0); });
  return absl::OkStatus();
}

absl::Status FastCpuKernelOps::GeluBackward(const KernelContext&, Tensor& dx, const Tensor& dy,
                                            const Tensor& x) {
  WEFT_RETURN_IF_ERROR(CheckCpu(x, "gelu x"));
  WEFT_RETURN_IF_ERROR(CheckNumel(dy, "gelu dy", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckNumel(dx, "gelu dx", x.numel()));
  const float *px = x.data<float>(), *pdy = dy.data<float>();
  float* pdx = dx.data<float>();
  ParallelFor(x.numel(), 4096, [&](int64_t i0, int64_t i1) {
    GeluGradRange(pdx + i0, pdy + i0, px + i0, i1 - i0);
  });
  return absl::OkStatus();
}

absl::Status FastCpuKernelOps::Add(const KernelContext&, Tensor& out, const Tensor& a,
                                   const Tensor& b) {
  WEFT_RETURN_IF_ERROR(CheckCpu(a, "add a"));
  WEFT_RETURN_IF_ERROR(CheckNumel(b, "add b", a.numel()));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "add out", a.numel()));
  const float *pa = a.data<float>(), *pb = b.data<float>();
  float* po = out.data<float>();
  ParallelFor(a.numel(), 16384,
              [&](int64_t i0, int64_t i1) { AddRange(po + i0, pa + i0, pb + i0, i1 - i0); });
  return absl::OkStatus();
}

absl::Status FastCpuKernelOps::CrossEntropyForwardBackward(const KernelContext& ctx,
                                                           Tensor& losses, Tensor& logits,
                                                           const Tensor& targets, int64_t vocab,
                                                           float dloss_scale,
                                                           bool compute_grad) {
  WEFT_RETURN_IF_ERROR(CheckCpu(logits, "cross_entropy logits"));
  const int64_t vp = logits.dim(-1), rows = logits.numel() / std::max<int64_t>(vp, 1);
  if (vocab <= 0 || vocab > vp) {
    return CpuKernelOps::CrossEntropyForwardBackward(ctx, losses, logits, targets, vocab,
                                                     dloss_scale, compute_grad);
  }
  WEFT_RETURN_IF_ERROR(CheckNumel(targets, "cross_entropy targets", rows, DType::kI32));
  WEFT_RETURN_IF_ERROR(CheckNumel(losses, "cross_entropy losses", rows));
  const int32_t* tg = targets.data<int32_t>();
  for (int64_t r = 0; r < rows; ++r) {  // validate before writing anything
    if (tg[r] >= vocab) {
      return InvalidArgument(absl::StrCat("target id ", tg[r], " in row ", r),
                             absl::StrCat("ids < vocab ", vocab));
    }
  }
  float* pl = logits.data<float>();
  float* loss = losses.data<float>();
  ParallelFor(rows, 4, [&](int64_t r0, int64_t r1) {
    CrossEntropyRows(loss, pl, tg, r0, r1, vp, vocab, dloss_scale, compute_grad,
                     compute_grad ? nullptr : Scratch(vocab));
  });
  return absl::OkStatus();
}

absl::Status FastCpuKernelOps::SumSquares(const KernelContext& ctx, Tensor& out,
                                          absl::Span<const Tensor> tensors) {
  for (const Tensor& t : tensors) {
    if (!t.defined() || t.dtype() != DType::kF32 || !t.device().is_cpu()) {
      return CpuKernelOps::SumSquares(ctx, out, tensors);
    }
  }
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "sum_squares out", 1));
  // Partial sums over fixed blocks, added in order: thread-count independent.
  std::vector<std::pair<const float*, int64_t>> blocks;
  for (const Tensor& t : tensors) {
    WEFT_RETURN_IF_ERROR(CheckFloat(t, "sum_squares input"));
    const float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); i += kSumBlock) {
      blocks.emplace_back(p + i, std::min(kSumBlock, t.numel() - i));
    }
  }
  std::vector<double> partial(blocks.size());
  ParallelFor(static_cast<int64_t>(blocks.size()), 2, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) partial[i] = SumSquaresF(blocks[i].first, blocks[i].second);
  });
  double s = 0;
  for (double v : partial) s += v;
  *out.data<float>() = static_cast<float>(s);
  return absl::OkStatus();
}

absl::Status FastCpuKernelOps::AdamW(const KernelContext& ctx, absl::Span<OptimSegment> segments,
                                     const AdamWHyper& h) {
  bool fast = h.step >= 1 || h.step_scalars.defined();
  for (const OptimSegment& s : segments) {
    const int64_t n = s.master.defined() ? s.master.numel() : -1;
    auto f32_cpu = [n](const Tensor& t) {
      return t.defined() && t.dtype() == DType::kF32 && t.device().is_cpu() &&
             t.is_contiguous() && t.numel() == n;
    };
    fast = fast && f32_cpu(s.master) && f32_cpu(s.grad) && f32_cpu(s.exp_avg) &&
           f32_cpu(s.exp_avg_sq) && (!s.param.defined() || f32_cpu(s.param));
  }
  if (!fast) return CpuKernelOps::AdamW(ctx, segments, h);
  float clip = 1.0f;
  if (h.max_grad_norm > 0) {
    WEFT_RETURN_IF_ERROR(CheckNumel(h.grad_norm_sq, "grad_norm_sq", 1));
    const float norm = std::sqrt(*h.grad_norm_sq.data<float>());
    clip = std::min(1.0f, h.max_grad_norm / (norm + 1e-6f));
  }
  WEFT_ASSIGN_OR_RETURN(const auto scalars, HostAdamWStepScalars(h));
  AdamConst k{h.beta1,
              h.beta2,
              scalars[1],
              scalars[2],
              scalars[0],
              h.eps,
              0.0f,
              h.grad_scale * clip};
  // One parallel region for all segments: blocks of every tensor.
  struct Block {
    const OptimSegment* s;
    int64_t begin, n;
  };
  std::vector<Block> blocks;
  for (const OptimSegment& s : segments) {
    for (int64_t i = 0; i < s.master.numel(); i += kSumBlock) {
      blocks.push_back({&s, i, std::min(kSumBlock, s.master.numel() - i)});
    }
  }
  ParallelFor(static_cast<int64_t>(blocks.size()), 1, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) {
      const Block& bl = blocks[i];
      const OptimSegment& s = *bl.s;
      AdamConst kk = k;
      kk.decay = s.weight_decay ? h.weight_decay : 0.0f;
      AdamWRange(s.master.data<float>() + bl.begin, s.exp_avg.data<float>() + bl.begin,
                 s.exp_avg_sq.data<float>() + bl.begin, s.grad.data<float>() + bl.begin,
                 s.param.defined() ? s.param.data<float>() + bl.begin : nullptr, bl.n, kk);
    }
  });
  return absl::OkStatus();
}

}  // namespace weft::cpu
