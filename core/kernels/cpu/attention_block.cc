// Blockwise causal attention for ring (context-parallel) attention: the
// queries of one rank against one K/V block, masked by global positions.
// Forward merges the block into running (out, lse) with the log-sum-exp
// rule; backward recomputes the block's probabilities from the merged lse,
// the same recompute the whole-sequence kernel does (attention.cc).
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/cpu_ops.h"

namespace weft::cpu {
namespace {

struct BlockDims {
  int64_t b, tq, tk, c, nh, hs;
  int64_t q_width, kv_width, k_col, v_col;
};

absl::Status CheckChunks(const TokenChunks& ch, int64_t t, const char* what) {
  if (ch.count < 1 || ch.count > TokenChunks::kMaxChunks || ch.chunk_len <= 0 || ch.size() != t) {
    return InvalidArgument(
        absl::StrCat(what, " chunks: ", ch.count, " of ", ch.chunk_len, " tokens for a block of ",
                     t),
        absl::StrCat("1..", TokenChunks::kMaxChunks, " equal chunks covering the block"));
  }
  return absl::OkStatus();
}

// c: the model width (from out/dout); q is (B, Tq, C or 3C), kv (B, Tk, 2C or 3C).
absl::StatusOr<BlockDims> CheckBlock(const Tensor& q, const TokenChunks& qc, const Tensor& kv,
                                     const TokenChunks& kc, int64_t c, int num_heads) {
  WEFT_RETURN_IF_ERROR(CheckCpu(q, "block attention q"));
  WEFT_RETURN_IF_ERROR(CheckCpu(kv, "block attention kv"));
  if (q.ndim() != 3 || (q.dim(2) != c && q.dim(2) != 3 * c)) {
    return InvalidArgument("block attention q has shape " + ShapeString(q.shape()),
                           absl::StrCat("(B, Tq, ", c, ") or (B, Tq, ", 3 * c, ")"));
  }
  if (kv.ndim() != 3 || kv.dim(0) != q.dim(0) || (kv.dim(2) != 2 * c && kv.dim(2) != 3 * c)) {
    return InvalidArgument(
        "block attention kv has shape " + ShapeString(kv.shape()),
        absl::StrCat("(", q.dim(0), ", Tk, ", 2 * c, ") or (", q.dim(0), ", Tk, ", 3 * c, ")"));
  }
  if (num_heads <= 0 || c % num_heads != 0) {
    return InvalidArgument(absl::StrCat("num_heads=", num_heads, " with C=", c),
                           "a positive divisor of C");
  }
  BlockDims d{q.dim(0),      q.dim(1), kv.dim(1), c, num_heads,
              c / num_heads, q.dim(2), kv.dim(2), 0, 0};
  d.k_col = d.kv_width == 3 * c ? c : 0;
  d.v_col = d.k_col + c;
  WEFT_RETURN_IF_ERROR(CheckChunks(qc, d.tq, "query"));
  WEFT_RETURN_IF_ERROR(CheckChunks(kc, d.tk, "key"));
  return d;
}

// Calls fn(j) for every key j visible to a query at global position `pos`.
template <typename F>
void ForVisibleKeys(const TokenChunks& kc, int64_t pos, F&& fn) {
  for (int k = 0; k < kc.count; ++k) {
    const int64_t off = kc.offsets[k];
    if (off > pos) continue;
    const int64_t n = std::min(kc.chunk_len, pos - off + 1);
    for (int64_t jj = 0; jj < n; ++jj) fn(k * kc.chunk_len + jj);
  }
}

}  // namespace

absl::Status CpuKernelOps::AttentionBlockForward(const KernelContext&, Tensor& out, Tensor& lse,
                                                 const Tensor& q, const TokenChunks& q_chunks,
                                                 const Tensor& kv, const TokenChunks& kv_chunks,
                                                 int num_heads, bool accumulate) {
  if (out.ndim() != 3) {
    return InvalidArgument("block attention out has shape " + ShapeString(out.shape()),
                           "(B, Tq, C)");
  }
  WEFT_ASSIGN_OR_RETURN(BlockDims d, CheckBlock(q, q_chunks, kv, kv_chunks, out.dim(2), num_heads));
  WEFT_RETURN_IF_ERROR(CheckCpu(out, "block attention out"));
  WEFT_RETURN_IF_ERROR(CheckShape(out, "block attention out", {d.b, d.tq, d.c}));
  WEFT_RETURN_IF_ERROR(CheckShape(lse, "block attention lse", {d.b, d.nh, d.tq}));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hs));
  const float* pq = q.data<float>();
  const float* pkv = kv.data<float>();
  float* po = out.data<float>();
  float* pl = lse.data<float>();
  std::vector<float> s(d.tk), ob(d.hs);
  std::vector<int64_t> keys;
  keys.reserve(d.tk);
  for (int64_t b = 0; b < d.b; ++b) {
    for (int64_t h = 0; h < d.nh; ++h) {
      for (int64_t i = 0; i < d.tq; ++i) {
        const float* qi = pq + (b * d.tq + i) * d.q_width + h * d.hs;
        keys.clear();
        ForVisibleKeys(kv_chunks, q_chunks.Position(i), [&](int64_t j) { keys.push_back(j); });
        float mx = -INFINITY;
        for (size_t n = 0; n < keys.size(); ++n) {
          const float* k = pkv + (b * d.tk + keys[n]) * d.kv_width + d.k_col + h * d.hs;
          float dot = 0;
          for (int64_t e = 0; e < d.hs; ++e) dot += qi[e] * k[e];
          s[n] = dot * scale;
          mx = std::max(mx, s[n]);
        }
        float lb = -INFINITY;
        std::fill(ob.begin(), ob.end(), 0.f);
        if (!keys.empty()) {
          double sum = 0;
          for (size_t n = 0; n < keys.size(); ++n) sum += std::exp(double(s[n] - mx));
          lb = mx + static_cast<float>(std::log(sum));
          for (size_t n = 0; n < keys.size(); ++n) {
            const float p = std::exp(s[n] - lb);
            const float* v = pkv + (b * d.tk + keys[n]) * d.kv_width + d.v_col + h * d.hs;
            for (int64_t e = 0; e < d.hs; ++e) ob[e] += p * v[e];
          }
        }
        float* o = po + (b * d.tq + i) * d.c + h * d.hs;
        float& l = pl[(b * d.nh + h) * d.tq + i];
        if (!accumulate || l == -INFINITY) {
          l = lb;
          std::copy(ob.begin(), ob.end(), o);
        } else if (lb != -INFINITY) {
          // Both blocks saw keys: rescale each by its share of the merged sum.
          const float hi = std::max(l, lb), lo = std::min(l, lb);
          const float merged = hi + std::log1p(std::exp(lo - hi));
          const float wa = std::exp(l - merged), wb = std::exp(lb - merged);
          for (int64_t e = 0; e < d.hs; ++e) o[e] = o[e] * wa + ob[e] * wb;
          l = merged;
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CpuKernelOps::AttentionBlockBackward(const KernelContext&, Tensor& dq, Tensor& dkv,
                                                  const Tensor& dout, const Tensor& q,
                                                  const TokenChunks& q_chunks, const Tensor& kv,
                                                  const TokenChunks& kv_chunks, const Tensor& out,
                                                  const Tensor& lse, int num_heads) {
  if (dout.ndim() != 3) {
    return InvalidArgument("block attention dout has shape " + ShapeString(dout.shape()),
                           "(B, Tq, C)");
  }
  WEFT_ASSIGN_OR_RETURN(BlockDims d,
                        CheckBlock(q, q_chunks, kv, kv_chunks, dout.dim(2), num_heads));
  WEFT_RETURN_IF_ERROR(CheckCpu(dout, "block attention dout"));
  WEFT_RETURN_IF_ERROR(CheckShape(dout, "block attention dout", {d.b, d.tq, d.c}));
  WEFT_RETURN_IF_ERROR(CheckShape(out, "block attention out", {d.b, d.tq, d.c}));
  WEFT_RETURN_IF_ERROR(CheckShape(lse, "block attention lse", {d.b, d.nh, d.tq}));
  WEFT_RETURN_IF_ERROR(CheckShape(dq, "block attention dq", {d.b, d.tq, d.q_width}));
  WEFT_RETURN_IF_ERROR(CheckShape(dkv, "block attention dkv", {d.b, d.tk, d.kv_width}));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hs));
  const float* pq = q.data<float>();
  const float* pkv = kv.data<float>();
  float* pdq = dq.data<float>();
  float* pdkv = dkv.data<float>();
  for (int64_t b = 0; b < d.b; ++b) {
    for (int64_t h = 0; h < d.nh; ++h) {
      for (int64_t i = 0; i < d.tq; ++i) {
        const float l = lse.data<float>()[(b * d.nh + h) * d.tq + i];
        if (l == -INFINITY) continue;  // no key anywhere: no gradient
        const float* qi = pq + (b * d.tq + i) * d.q_width + h * d.hs;
        const float* go = dout.data<float>() + (b * d.tq + i) * d.c + h * d.hs;
        const float* o = out.data<float>() + (b * d.tq + i) * d.c + h * d.hs;
        float dsum = 0;  // D_i = dO_i . O_i over the merged output
        for (int64_t e = 0; e < d.hs; ++e) dsum += go[e] * o[e];
        float* dqi = pdq + (b * d.tq + i) * d.q_width + h * d.hs;
        ForVisibleKeys(kv_chunks, q_chunks.Position(i), [&](int64_t j) {
          const int64_t row = (b * d.tk + j) * d.kv_width + h * d.hs;
          const float* k = pkv + row + d.k_col;
          const float* v = pkv + row + d.v_col;
          float dot = 0, dp = 0;
          for (int64_t e = 0; e < d.hs; ++e) {
            dot += qi[e] * k[e];
            dp += go[e] * v[e];
          }
          const float p = std::exp(dot * scale - l);
          const float ds = p * (dp - dsum) * scale;
          float* dk = pdkv + row + d.k_col;
          float* dv = pdkv + row + d.v_col;
          for (int64_t e = 0; e < d.hs; ++e) {
            dqi[e] += ds * k[e];
            dk[e] += ds * qi[e];
            dv[e] += p * go[e];
          }
        });
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::cpu
