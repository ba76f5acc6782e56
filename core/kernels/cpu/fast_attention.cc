// FastCpuKernelOps causal attention, forward and backward.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/fast_math.h"
#include "core/kernels/cpu/fast_ops.h"
#include "core/kernels/cpu/thread_pool.h"

namespace weft::cpu {
namespace {

using namespace ::weft::cpu::fast;  // NOLINT: this unit's vector helpers

struct AttnDims {
  int64_t b, t, c, nh, hs;
  // Where (batch, head) bh starts: its q columns in the fused (B, T, 3C) qkv
  // rows (k and v follow C and 2C later), and its columns of (B, T, C).
  int64_t QkvAt(int64_t bh) const { return bh / nh * t * 3 * c + bh % nh * hs; }
  int64_t OutAt(int64_t bh) const { return bh / nh * t * c + bh % nh * hs; }
};

// One (batch, head) at a time, as GEMMs on the strided q/k/v columns of the
// fused qkv rows (leading dimension 3C): S = scale Q K^T, a causal softmax
// per row, O = P V; GEMMs instead of per-row dot products over a 32-64
// element head. Rows go in blocks of kRowBlock: block [i0, i1) attends to
// keys [0, i1) only, so the masked upper triangle is skipped except inside
// the diagonal blocks (at T = 256, 5/8 of the full square's multiply-adds),
// and the scores of one block (kRowBlock x T) stay in cache.
constexpr int64_t kRowBlock = 64;

// Rows [i0, i1) of a block's scores p (row i at p + (i - i0) * ld, keys
// [0, i1)): causal softmax in place, lse per row; keys past i are zeroed.
WEFT_CLONES void SoftmaxCausalRows(float* p, int64_t ld, float* lse_row, int64_t i0,
                                   int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    float* r = p + (i - i0) * ld;
    const float mx = MaxF(r, i + 1);
    for (int64_t j = 0; j <= i; ++j) r[j] = ExpF(r[j] - mx);
    const float sum = SumF(r, i + 1);
    lse_row[i] = mx + std::log(sum);
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j <= i; ++j) r[j] *= inv;
    std::fill(r + i + 1, r + i1, 0.0f);
  }
}

// p: kRowBlock x T scratch.
void AttentionForwardHeads(float* po, float* pl, const float* base, AttnDims d, int64_t bh0,
                           int64_t bh1, float* p) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hs));
  const int t = static_cast<int>(d.t), hs = static_cast<int>(d.hs);
  const int row = static_cast<int>(3 * d.c), c = static_cast<int>(d.c);
  for (int64_t bh = bh0; bh < bh1; ++bh) {
    const float* qb = base + d.QkvAt(bh);
    const float* kb = qb + d.c;
    const float* vb = qb + 2 * d.c;
    for (int i0 = 0; i0 < t; i0 += kRowBlock) {
      const int i1 = std::min<int>(t, i0 + kRowBlock), m = i1 - i0;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, i1, hs, scale, qb + i0 * row, row,
                  kb, row, 0.0f, p, t);
      SoftmaxCausalRows(p, t, pl + bh * d.t, i0, i1);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, i1, 1.0f, p, t, vb, row,
                  0.0f, po + d.OutAt(bh) + int64_t{i0} * c, c);
    }
  }
}

// Rows [i0, i1) of a block (row i at offset (i - i0) * ld, keys [0, i1)):
// P = exp(S - lse), dS = P (dP - D) scale with D = rowsum(dO O), in place
// of S and dP; keys past i are zeroed.
WEFT_CLONES void AttentionGradRows(float* p, float* ds, int64_t ld, const float* lse_row,
                                   const float* go, const float* o, int64_t i0, int64_t i1,
                                   int64_t hs, int64_t c, float scale) {
  for (int64_t i = i0; i < i1; ++i) {
    float* pr = p + (i - i0) * ld;
    float* dr = ds + (i - i0) * ld;
    const float l = lse_row[i];
    const float dsum = Dot(go + i * c, o + i * c, hs);
    for (int64_t j = 0; j <= i; ++j) {
      pr[j] = ExpF(pr[j] - l);
      dr[j] = pr[j] * (dr[j] - dsum) * scale;
    }
    std::fill(pr + i + 1, pr + i1, 0.0f);
    std::fill(dr + i + 1, dr + i1, 0.0f);
  }
}

// Per row block: S and dP = dO V^T for keys [0, i1), then dQ[i0, i1) +=
// dS K, and dK, dV [0, i1) += dS^T Q, P^T dO. p, dp: kRowBlock x T scratch.
void AttentionBackwardHeads(float* dbase, const float* base, const float* pdout,
                            const float* pout, const float* plse, AttnDims d, int64_t bh0,
                            int64_t bh1, float* p, float* dp) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hs));
  const int t = static_cast<int>(d.t), hs = static_cast<int>(d.hs);
  const int row = static_cast<int>(3 * d.c), c = static_cast<int>(d.c);
  for (int64_t bh = bh0; bh < bh1; ++bh) {
    const float* qb = base + d.QkvAt(bh);
    const float* kb = qb + d.c;
    const float* vb = qb + 2 * d.c;
    float* dqb = dbase + d.QkvAt(bh);
    float* dkb = dqb + d.c;
    float* dvb = dqb + 2 * d.c;
    const float* gob = pdout + d.OutAt(bh);
    const float* ob = pout + d.OutAt(bh);
    for (int i0 = 0; i0 < t; i0 += kRowBlock) {
      const int i1 = std::min<int>(t, i0 + kRowBlock), m = i1 - i0;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, i1, hs, scale, qb + i0 * row, row,
                  kb, row, 0.0f, p, t);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, i1, hs, 1.0f, gob + i0 * c, c, vb,
                  row, 0.0f, dp, t);
      AttentionGradRows(p, dp, t, plse + bh * d.t, gob, ob, i0, i1, d.hs, d.c, scale);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, i1, 1.0f, dp, t, kb, row,
                  1.0f, dqb + i0 * row, row);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, i1, hs, m, 1.0f, dp, t,
                  qb + i0 * row, row, 1.0f, dkb, row);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, i1, hs, m, 1.0f, p, t, gob + i0 * c,
                  c, 1.0f, dvb, row);
    }
  }
}

}  // namespace

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
    AttentionForwardHeads(po, pl, base, d, bh0, bh1, Scratch(kRowBlock * d.t));
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
    float* s = Scratch(2 * kRowBlock * d.t);
    AttentionBackwardHeads(dbase, base, pdo, pout, pl, d, bh0, bh1, s, s + kRowBlock * d.t);
  });
  return absl::OkStatus();
}

}  // namespace weft::cpu
