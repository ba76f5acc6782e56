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
#include "core/kernels/cpu/gelu_math.h"
#include "core/kernels/cpu/thread_pool.h"

#define WEFT_CLONES __attribute__((target_clones("avx2", "default")))

namespace weft::cpu {
namespace {

constexpr int kL = 8;  // accumulator lanes (one AVX2 register)

// Fixed-order 8-lane reductions: vectorised without -ffast-math and the
// same result on every ISA clone.
inline float Dot(const float* a, const float* b, int64_t n) {
  float acc[kL] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t e = 0;
  for (; e + kL <= n; e += kL) {
    for (int l = 0; l < kL; ++l) acc[l] += a[e + l] * b[e + l];
  }
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; e < n; ++e) s += a[e] * b[e];
  return s;
}

inline float SumF(const float* a, int64_t n) {
  float acc[kL] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t e = 0;
  for (; e + kL <= n; e += kL) {
    for (int l = 0; l < kL; ++l) acc[l] += a[e + l];
  }
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; e < n; ++e) s += a[e];
  return s;
}

inline float MaxF(const float* a, int64_t n) {
  float acc[kL];
  for (int l = 0; l < kL; ++l) acc[l] = -INFINITY;
  int64_t e = 0;
  for (; e + kL <= n; e += kL) {
    for (int l = 0; l < kL; ++l) acc[l] = acc[l] > a[e + l] ? acc[l] : a[e + l];
  }
  float m = acc[0];
  for (int l = 1; l < kL; ++l) m = m > acc[l] ? m : acc[l];
  for (; e < n; ++e) m = m > a[e] ? m : a[e];
  return m;
}

inline void Axpy(float* y, float a, const float* x, int64_t n) {
  for (int64_t e = 0; e < n; ++e) y[e] += a * x[e];
}

// expf to ~2 ulp (Cephes polynomial), branch-free so loops vectorise.
// Inputs are clamped to [-87.3, 88.3].
inline float ExpF(float x) {
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  const float t = x * 1.44269504088896341f;
  const float n = (t + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

inline float TanhF(float u) {
  const float e = ExpF(2.0f * u);
  const float big = 1.0f - 2.0f / (e + 1.0f);
  const float u2 = u * u;  // odd series near 0, where 1 - 2/(e+1) cancels
  const float small = u * (1.0f + u2 * (-1.0f / 3 + u2 * (2.0f / 15 + u2 * (-17.0f / 315))));
  const float au = u < 0 ? -u : u;
  return au < 0.125f ? small : big;
}

inline float GeluF(float x) {
  const float u = kGeluScale * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + TanhF(u));
}

inline float GeluGradF(float x) {
  const float u = kGeluScale * (x + kGeluCubic * x * x * x);
  const float t = TanhF(u);
  const float du = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

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

// ---- layernorm ---------------------------------------------------------------

WEFT_CLONES void NormalizeRowsFast(float* out, float* mean, float* rstd, float* resid,
                                   const float* a, const float* b, const float* w,
                                   const float* bias, int64_t r0, int64_t r1, int64_t c,
                                   float eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr;
    if (b != nullptr) {  // fused residual: resid = a + b, normalise resid
      float* rr = resid + r * c;
      const float* ar = a + r * c;
      const float* br = b + r * c;
      for (int64_t i = 0; i < c; ++i) rr[i] = ar[i] + br[i];
      xr = rr;
    } else {
      xr = a + r * c;
    }
    const float m = SumF(xr, c) / static_cast<float>(c);
    float acc[kL] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + kL <= c; i += kL) {
      for (int l = 0; l < kL; ++l) {
        const float d = xr[i + l] - m;
        acc[l] += d * d;
      }
    }
    float var = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < c; ++i) var += (xr[i] - m) * (xr[i] - m);
    const float s = 1.0f / std::sqrt(var / static_cast<float>(c) + eps);
    float* o = out + r * c;
    for (int64_t k = 0; k < c; ++k) o[k] = (xr[k] - m) * s * w[k] + bias[k];
    mean[r] = m;
    rstd[r] = s;
  }
}

WEFT_CLONES void LayerNormDxRows(float* dx, const float* x, const float* dy, const float* w,
                                 const float* mean, const float* rstd, int64_t r0, int64_t r1,
                                 int64_t c, const float* residual, float* scratch) {
  float* xhat = scratch;
  float* dxhat = scratch + c;
  for (int64_t r = r0; r < r1; ++r) {
    const float m = mean[r], s = rstd[r];
    const float* xr = x + r * c;
    const float* gr = dy + r * c;
    for (int64_t i = 0; i < c; ++i) {
      xhat[i] = (xr[i] - m) * s;
      dxhat[i] = gr[i] * w[i];
    }
    const float mean_dxhat = SumF(dxhat, c) / static_cast<float>(c);
    const float mean_dxhat_xhat = Dot(dxhat, xhat, c) / static_cast<float>(c);
    float* d = dx + r * c;
    if (residual != nullptr) {  // may be dx itself
      const float* rr = residual + r * c;
      for (int64_t i = 0; i < c; ++i) {
        d[i] = rr[i] + s * (dxhat[i] - mean_dxhat - xhat[i] * mean_dxhat_xhat);
      }
    } else {
      for (int64_t i = 0; i < c; ++i) d[i] = s * (dxhat[i] - mean_dxhat - xhat[i] * mean_dxhat_xhat);
    }
  }
}

// dw[j] += sum_r dy[r,j] * xhat[r,j], db[j] += sum_r dy[r,j], rows in order.
WEFT_CLONES void LayerNormParamGradCols(float* dw, float* db, const float* x, const float* dy,
                                        const float* mean, const float* rstd, int64_t rows,
                                        int64_t c, int64_t j0, int64_t j1) {
  for (int64_t r = 0; r < rows; ++r) {
    const float m = mean[r], s = rstd[r];
    const float* xr = x + r * c;
    const float* gr = dy + r * c;
    for (int64_t j = j0; j < j1; ++j) {
      db[j] += gr[j];
      dw[j] += gr[j] * ((xr[j] - m) * s);
    }
  }
}

// ---- attention ---------------------------------------------------------------

struct AttnDims {
  int64_t b, t, c, nh, hs;
};

// One (batch, head) at a time, as GEMMs on the strided q/k/v columns of the
// fused qkv rows (leading dimension 3C): S = scale Q K^T (T x T), a causal
// softmax per row, O = P V. The upper triangle is computed and zeroed rather
// than skipped: twice the multiply-adds of the causal half, at BLAS speed
// instead of per-row dot products over a 32-64 element head.
WEFT_CLONES void SoftmaxCausalRows(float* p, float* lse_row, int64_t t) {
  for (int64_t i = 0; i < t; ++i) {
    float* r = p + i * t;
    const float mx = MaxF(r, i + 1);
    for (int64_t j = 0; j <= i; ++j) r[j] = ExpF(r[j] - mx);
    const float sum = SumF(r, i + 1);
    lse_row[i] = mx + std::log(sum);
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j <= i; ++j) r[j] *= inv;
    std::fill(r + i + 1, r + t, 0.0f);
  }
}

void AttentionForwardHeads(float* po, float* pl, const float* base, AttnDims d, int64_t bh0,
                           int64_t bh1, float* p) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hs));
  const int t = static_cast<int>(d.t), hs = static_cast<int>(d.hs);
  const int row = static_cast<int>(3 * d.c), c = static_cast<int>(d.c);
  for (int64_t bh = bh0; bh < bh1; ++bh) {
    const int64_t b = bh / d.nh, h = bh % d.nh;
    const float* qb = base + b * d.t * row + h * d.hs;
    const float* kb = qb + d.c;
    const float* vb = qb + 2 * d.c;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, hs, scale, qb, row, kb, row, 0.0f,
                p, t);
    SoftmaxCausalRows(p, pl + bh * d.t, d.t);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, hs, t, 1.0f, p, t, vb, row, 0.0f,
                po + b * d.t * d.c + h * d.hs, c);
  }
}

// P = exp(scale Q K^T - lse) (causal), dP = dO V^T, dS = P (dP - D) scale
// with D = rowsum(dO O); then dQ += dS K, dK += dS^T Q, dV += P^T dO.
WEFT_CLONES void AttentionGradRows(float* p, float* ds, const float* lse_row, const float* go,
                                   const float* o, int64_t t, int64_t hs, int64_t c,
                                   float scale) {
  for (int64_t i = 0; i < t; ++i) {
    float* pr = p + i * t;
    float* dr = ds + i * t;
    const float l = lse_row[i];
    const float dsum = Dot(go + i * c, o + i * c, hs);
    for (int64_t j = 0; j <= i; ++j) {
      pr[j] = ExpF(pr[j] - l);
      dr[j] = pr[j] * (dr[j] - dsum) * scale;
    }
    std::fill(pr + i + 1, pr + t, 0.0f);
    std::fill(dr + i + 1, dr + t, 0.0f);
  }
}

void AttentionBackwardHeads(float* dbase, const float* base, const float* pdout,
                            const float* pout, const float* plse, AttnDims d, int64_t bh0,
                            int64_t bh1, float* p, float* dp) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hs));
  const int t = static_cast<int>(d.t), hs = static_cast<int>(d.hs);
  const int row = static_cast<int>(3 * d.c), c = static_cast<int>(d.c);
  for (int64_t bh = bh0; bh < bh1; ++bh) {
    const int64_t b = bh / d.nh, h = bh % d.nh;
    const float* qb = base + b * d.t * row + h * d.hs;
    const float* kb = qb + d.c;
    const float* vb = qb + 2 * d.c;
    float* dqb = dbase + b * d.t * row + h * d.hs;
    float* dkb = dqb + d.c;
    float* dvb = dqb + 2 * d.c;
    const float* gob = pdout + b * d.t * d.c + h * d.hs;
    const float* ob = pout + b * d.t * d.c + h * d.hs;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, hs, scale, qb, row, kb, row, 0.0f,
                p, t);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, hs, 1.0f, gob, c, vb, row, 0.0f,
                dp, t);
    AttentionGradRows(p, dp, plse + bh * d.t, gob, ob, d.t, d.hs, d.c, scale);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, hs, t, 1.0f, dp, t, kb, row, 1.0f,
                dqb, row);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t, hs, t, 1.0f, dp, t, qb, row, 1.0f,
                dkb, row);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t, hs, t, 1.0f, p, t, gob, c, 1.0f,
                dvb, row);
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

// Scratch reused across calls (one per pool thread), so steps do not allocate.
float* Scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

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

absl::Status FastCpuKernelOps::LayerNormForward(const KernelContext& ctx, Tensor& out,
                                                Tensor& mean, Tensor& rstd, const Tensor& x,
                                                const Tensor& weight, const Tensor& bias,
                                                float eps) {
  WEFT_RETURN_IF_ERROR(CheckCpu(x, "layernorm x"));
  if (x.ndim() < 1 || x.dim(-1) == 0) {
    return CpuKernelOps::LayerNormForward(ctx, out, mean, rstd, x, weight, bias, eps);
  }
  const int64_t c = x.dim(-1), rows = x.numel() / c;
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "layernorm out", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckNumel(mean, "layernorm mean", rows));
  WEFT_RETURN_IF_ERROR(CheckNumel(rstd, "layernorm rstd", rows));
  WEFT_RETURN_IF_ERROR(CheckShape(weight, "layernorm weight", {c}));
  WEFT_RETURN_IF_ERROR(CheckShape(bias, "layernorm bias", {c}));
  float *po = out.data<float>(), *pm = mean.data<float>(), *ps = rstd.data<float>();
  const float *px = x.data<float>(), *pw = weight.data<float>(), *pb = bias.data<float>();
  ParallelFor(rows, 8, [&](int64_t r0, int64_t r1) {
    NormalizeRowsFast(po, pm, ps, nullptr, px, nullptr, pw, pb, r0, r1, c, eps);
  });
  return absl::OkStatus();
}

absl::Status FastCpuKernelOps::ResidualLayerNormForward(
    const KernelContext& ctx, Tensor& residual_out, Tensor& out, Tensor& mean, Tensor& rstd,
    const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias, float eps) {
  WEFT_RETURN_IF_ERROR(CheckCpu(a, "layernorm x"));
  if (a.ndim() < 1 || a.dim(-1) == 0) {
    return CpuKernelOps::ResidualLayerNormForward(ctx, residual_out, out, mean, rstd, a, b,
                                                  weight, bias, eps);
  }
  WEFT_RETURN_IF_ERROR(CheckNumel(b, "residual b", a.numel()));
  WEFT_RETURN_IF_ERROR(CheckNumel(residual_out, "residual out", a.numel()));
  const int64_t c = a.dim(-1), rows = a.numel() / c;
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "layernorm out", a.numel()));
  WEFT_RETURN_IF_ERROR(CheckNumel(mean, "layernorm mean", rows));
  WEFT_RETURN_IF_ERROR(CheckNumel(rstd, "layernorm rstd", rows));
  WEFT_RETURN_IF_ERROR(CheckShape(weight, "layernorm weight", {c}));
  WEFT_RETURN_IF_ERROR(CheckShape(bias, "layernorm bias", {c}));
  float *po = out.data<float>(), *pm = mean.data<float>(), *ps = rstd.data<float>();
  float* pr = residual_out.data<float>();
  const float *pa = a.data<float>(), *pbb = b.data<float>();
  const float *pw = weight.data<float>(), *pb = bias.data<float>();
  ParallelFor(rows, 8, [&](int64_t r0, int64_t r1) {
    NormalizeRowsFast(po, pm, ps, pr, pa, pbb, pw, pb, r0, r1, c, eps);
  });
  return absl::OkStatus();
}

absl::Status FastCpuKernelOps::LayerNormBackward(const KernelContext& ctx, Tensor& dx,
                                                 Tensor& dweight, Tensor& dbias,
                                                 const Tensor& dy, const Tensor& x,
                                                 const Tensor& weight, const Tensor& mean,
                                                 const Tensor& rstd, const Tensor& residual) {
  WEFT_RETURN_IF_ERROR(CheckCpu(x, "layernorm x"));
  if (x.ndim() < 1 || x.dim(-1) == 0) {
    return CpuKernelOps::LayerNormBackward(ctx, dx, dweight, dbias, dy, x, weight, mean, rstd,
                                           residual);
  }
  const int64_t c = x.dim(-1), rows = x.numel() / c;
  WEFT_RETURN_IF_ERROR(CheckNumel(dy, "layernorm out", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckNumel(mean, "layernorm mean", rows));
  WEFT_RETURN_IF_ERROR(CheckNumel(rstd, "layernorm rstd", rows));
  WEFT_RETURN_IF_ERROR(CheckShape(weight, "layernorm weight", {c}));
  WEFT_RETURN_IF_ERROR(CheckNumel(dx, "layernorm dx", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckShape(dweight, "layernorm dweight", {c}));
  WEFT_RETURN_IF_ERROR(CheckShape(dbias, "layernorm dbias", {c}));
  if (residual.defined()) {
    WEFT_RETURN_IF_ERROR(CheckNumel(residual, "layernorm residual", x.numel()));
  }
  const float* pres = residual.defined() ? residual.data<float>() : nullptr;
  const float *px = x.data<float>(), *pdy = dy.data<float>(), *pw = weight.data<float>();
  const float *pm = mean.data<float>(), *ps = rstd.data<float>();
  float *pdx = dx.data<float>(), *pdw = dweight.data<float>(), *pdb = dbias.data<float>();
  // Parameter grads first: dx may alias dy.
  ParallelFor(c, 32, [&](int64_t j0, int64_t j1) {
    LayerNormParamGradCols(pdw, pdb, px, pdy, pm, ps, rows, c, j0, j1);
  });
  ParallelFor(rows, 8, [&](int64_t r0, int64_t r1) {
    LayerNormDxRows(pdx, px, pdy, pw, pm, ps, r0, r1, c, pres, Scratch(2 * c));
  });
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

absl::Status FastCpuKernelOps::AttentionForward(const KernelContext& ctx, Tensor& out,
                                                Tensor& lse, const Tensor& qkv,
                                                int num_heads) {
  WEFT_RETURN_IF_ERROR(CheckCpu(qkv, "attention qkv"));
  if (qkv.ndim() != 3 || qkv.dim(2) % 3 != 0 || num_heads <= 0 ||
      (qkv.dim(2) / 3) % num_heads != 0) {
    return CpuKernelOps::AttentionForward(ctx, out, lse, qkv, num_heads);  // its errors
  }
  AttnDims d{qkv.dim(0), qkv.dim(1), qkv.dim(2) / 3, num_heads, 0};
  d.hs = d.c / num_heads;
  WEFT_RETURN_IF_ERROR(CheckShape(out, "attention out", {d.b, d.t, d.c}));
  WEFT_RETURN_IF_ERROR(CheckShape(lse, "attention lse", {d.b, d.nh, d.t}));
  float *po = out.data<float>(), *pl = lse.data<float>();
  const float* base = qkv.data<float>();
  ParallelFor(d.b * d.nh, 1, [&](int64_t bh0, int64_t bh1) {
    AttentionForwardHeads(po, pl, base, d, bh0, bh1, Scratch(d.t * d.t));
  });
  return absl::OkStatus();
}

absl::Status FastCpuKernelOps::AttentionBackward(const KernelContext& ctx, Tensor& dqkv,
                                                 const Tensor& dout, const Tensor& qkv,
                                                 const Tensor& out, const Tensor& lse,
                                                 int num_heads) {
  WEFT_RETURN_IF_ERROR(CheckCpu(qkv, "attention qkv"));
  if (qkv.ndim() != 3 || qkv.dim(2) % 3 != 0 || num_heads <= 0 ||
      (qkv.dim(2) / 3) % num_heads != 0) {
    return CpuKernelOps::AttentionBackward(ctx, dqkv, dout, qkv, out, lse, num_heads);
  }
  AttnDims d{qkv.dim(0), qkv.dim(1), qkv.dim(2) / 3, num_heads, 0};
  d.hs = d.c / num_heads;
  WEFT_RETURN_IF_ERROR(CheckShape(dqkv, "attention dqkv", {d.b, d.t, 3 * d.c}));
  WEFT_RETURN_IF_ERROR(CheckShape(dout, "attention dout", {d.b, d.t, d.c}));
  WEFT_RETURN_IF_ERROR(CheckShape(out, "attention out", {d.b, d.t, d.c}));
  WEFT_RETURN_IF_ERROR(CheckShape(lse, "attention lse", {d.b, d.nh, d.t}));
  float* dbase = dqkv.data<float>();
  std::memset(dbase, 0, dqkv.numel() * sizeof(float));
  const float *base = qkv.data<float>(), *pdo = dout.data<float>(), *pout = out.data<float>();
  const float* pl = lse.data<float>();
  ParallelFor(d.b * d.nh, 1, [&](int64_t bh0, int64_t bh1) {
    float* s = Scratch(2 * d.t * d.t);
    AttentionBackwardHeads(dbase, base, pdo, pout, pl, d, bh0, bh1, s, s + d.t * d.t);
  });
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
  bool fast = h.step >= 1;
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
  AdamConst k{h.beta1,
              h.beta2,
              1.0f - std::pow(h.beta1, static_cast<float>(h.step)),
              1.0f - std::pow(h.beta2, static_cast<float>(h.step)),
              h.lr,
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
