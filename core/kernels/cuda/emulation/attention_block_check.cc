// Runs the blockwise (ring) attention kernels of attention_block.cu under
// CPU emulation (see run.sh): every rank's queries against every rank's K/V
// block through LaunchAttentionBlockForward / Backward, the entry points
// CudaKernelOps::AttentionBlock{Forward,Backward} call. Compared with causal
// attention over the whole sequence in double: out and lse after each block
// (against the keys seen so far), dq and dK/dV after all of them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#include "core/kernels/cuda/attention.h"
#include "core/kernels/cuda/emulation/check_util.h"

using weft::DType;
using weft::TokenChunks;
using namespace emu_check;

namespace {

struct Case {
  const char* name;
  DType dt;
  int b, nh, hs, cp;
  int64_t len;
  bool zigzag;         // 2 chunks per rank (what cp uses), else 1 contiguous chunk
  int q_parts;         // q is (B, T, 1 or 3 x C): queries alone or a packed qkv
  int kv_parts;        // kv is (B, T, 2 or 3 x C): a K/V block or a packed qkv
  bool masked_first;   // visit blocks r+1, r+2, ... (future ones first) instead of r, r-1, ...
};

TokenChunks ChunksOf(const Case& c, int r) {
  TokenChunks t;
  t.chunk_len = c.len;
  t.count = c.zigzag ? 2 : 1;
  t.offsets[0] = r * c.len;
  if (c.zigzag) t.offsets[1] = (2 * c.cp - 1 - r) * c.len;
  return t;
}

// The whole sequence (B, T, C) of queries, keys, values and output gradients.
struct Seq {
  int b, t, nh, hs, c;
  std::vector<float> q, k, v, dout;
  size_t At(int bi, int64_t p, int h) const { return (size_t(bi) * t + p) * c + size_t(h) * hs; }
};

// Causal attention in double over the keys at `visible` positions: lse
// (B, NH, T) (-inf where no key is visible) and out (B, T, C) (0 there).
void RefForward(const Seq& s, const std::vector<char>& visible, std::vector<double>& out,
                std::vector<double>& lse) {
  out.assign(size_t(s.b) * s.t * s.c, 0.0);
  lse.assign(size_t(s.b) * s.nh * s.t, -INFINITY);
  const double scale = 1.0 / std::sqrt(double(s.hs));
  for (int b = 0; b < s.b; ++b) for (int h = 0; h < s.nh; ++h) for (int i = 0; i < s.t; ++i) {
    std::vector<double> sc(i + 1, -INFINITY);
    double mx = -INFINITY;
    for (int j = 0; j <= i; ++j) {
      if (!visible[j]) continue;
      double dot = 0;
      for (int e = 0; e < s.hs; ++e) dot += double(s.q[s.At(b, i, h) + e]) * s.k[s.At(b, j, h) + e];
      sc[j] = dot * scale;
      mx = std::max(mx, sc[j]);
    }
    if (mx == -INFINITY) continue;
    double sum = 0;
    for (int j = 0; j <= i; ++j) sum += std::exp(sc[j] - mx);
    const double l = mx + std::log(sum);
    lse[(size_t(b) * s.nh + h) * s.t + i] = l;
    for (int j = 0; j <= i; ++j) {
      const double p = std::exp(sc[j] - l);
      for (int e = 0; e < s.hs; ++e) out[s.At(b, i, h) + e] += p * s.v[s.At(b, j, h) + e];
    }
  }
}

// Gradients of causal attention over the whole sequence (B, T, C) each.
void RefBackward(const Seq& s, const std::vector<double>& out, const std::vector<double>& lse,
                 std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv) {
  dq.assign(out.size(), 0.0), dk.assign(out.size(), 0.0), dv.assign(out.size(), 0.0);
  const double scale = 1.0 / std::sqrt(double(s.hs));
  for (int b = 0; b < s.b; ++b) for (int h = 0; h < s.nh; ++h) for (int i = 0; i < s.t; ++i) {
    const size_t qi = s.At(b, i, h);
    double d = 0;
    for (int e = 0; e < s.hs; ++e) d += double(s.dout[qi + e]) * out[qi + e];
    for (int j = 0; j <= i; ++j) {
      const size_t kj = s.At(b, j, h);
      double dot = 0, dp = 0;
      for (int e = 0; e < s.hs; ++e) {
        dot += double(s.q[qi + e]) * s.k[kj + e];
        dp += double(s.dout[qi + e]) * s.v[kj + e];
      }
      const double p = std::exp(dot * scale - lse[(size_t(b) * s.nh + h) * s.t + i]);
      const double ds = p * (dp - d) * scale;
      for (int e = 0; e < s.hs; ++e) {
        dq[qi + e] += ds * s.k[kj + e];
        dk[kj + e] += ds * s.q[qi + e];
        dv[kj + e] += p * s.dout[qi + e];
      }
    }
  }
}

int Run(const Case& c) {
  const int C = c.nh * c.hs, count = c.zigzag ? 2 : 1;
  const int64_t tl = c.len * count;  // tokens per rank
  const int T = static_cast<int>(tl * c.cp);
  std::mt19937 g(7 + c.hs + c.cp);
  Seq s{c.b, T, c.nh, c.hs, C};
  const size_t n = size_t(c.b) * T * C;
  s.q = Rand(n, g, c.dt), s.k = Rand(n, g, c.dt), s.v = Rand(n, g, c.dt), s.dout = Rand(n, g, c.dt);
  const int qw = c.q_parts * C, kvw = c.kv_parts * C;
  // Where a kv row holds k and v.
  const int k_col = c.kv_parts == 3 ? C : 0, v_col = k_col + C;
  // Rank r's rows of the whole sequence, (B, tl, parts x C): q (1), k | v
  // (2) or q | k | v (3).
  auto local = [&](int r, int parts) {
    const TokenChunks ch = ChunksOf(c, r);
    std::vector<const std::vector<float>*> cols{&s.q, &s.k, &s.v};
    if (parts == 2) cols.erase(cols.begin());
    std::vector<float> x(size_t(c.b) * tl * parts * C);
    for (int b = 0; b < c.b; ++b) for (int64_t i = 0; i < tl; ++i) {
      const size_t from = s.At(b, ch.Position(i), 0);
      for (int part = 0; part < parts; ++part)
        std::copy_n(cols[part]->begin() + from, C, x.begin() + ((size_t(b) * tl + i) * parts + part) * C);
    }
    return x;
  };
  std::vector<std::vector<float>> q_host(c.cp), kv_host(c.cp);
  for (int r = 0; r < c.cp; ++r) q_host[r] = local(r, c.q_parts), kv_host[r] = local(r, c.kv_parts);
  auto order = [&](int r, int step) {
    return c.masked_first ? (r + 1 + step) % c.cp : (r - step + c.cp) % c.cp;
  };

  // dK/dV accumulate over every rank's queries, from random starting values.
  std::vector<std::vector<float>> dkv_init(c.cp);
  std::vector<Buf> dkv;
  for (int r = 0; r < c.cp; ++r) {
    dkv_init[r] = Rand(kv_host[r].size(), g, c.dt, 0.5f);
    dkv.emplace_back(c.dt, dkv_init[r]);
  }
  std::vector<double> full_out, full_lse, dq_ref, dk_ref, dv_ref;
  RefForward(s, std::vector<char>(T, 1), full_out, full_lse);
  RefBackward(s, full_out, full_lse, dq_ref, dk_ref, dv_ref);

  Err e_out, e_lse, e_dq, e_dkv;
  long untouched = 0;  // columns the kernels must leave alone but changed
  for (int r = 0; r < c.cp; ++r) {
    const TokenChunks mine = ChunksOf(c, r);
    Buf q(c.dt, q_host[r]);
    // Junk: accumulate=false must overwrite every element.
    Buf out(c.dt, std::vector<float>(size_t(c.b) * tl * C, 777.f));
    std::vector<float> lse(size_t(c.b) * c.nh * tl, 777.f);
    std::vector<char> visible(T, 0);
    for (int step = 0; step < c.cp; ++step) {
      const int src = order(r, step);
      const TokenChunks theirs = ChunksOf(c, src);
      Buf kv(c.dt, kv_host[src]);
      const weft::cuda::BlockAttentionArgs a{c.b, tl, tl, c.nh, c.hs, qw, kvw, mine, theirs};
      Ok(weft::cuda::LaunchAttentionBlockForward(out.data(), lse.data(), q.data(), kv.data(), c.dt,
                                                 a, /*accumulate=*/step > 0, nullptr),
         "forward");
      for (int64_t i = 0; i < tl; ++i) visible[theirs.Position(i)] = 1;
      std::vector<double> ro, rl;
      RefForward(s, visible, ro, rl);
      const std::vector<float> got = out.Get();
      for (int b = 0; b < c.b; ++b) for (int64_t i = 0; i < tl; ++i) {
        const int64_t p = mine.Position(i);
        for (int h = 0; h < c.nh; ++h) {
          e_lse.Add(lse[(size_t(b) * c.nh + h) * tl + i], rl[(size_t(b) * c.nh + h) * T + p]);
          for (int d = 0; d < c.hs; ++d)
            e_out.Add(got[(size_t(b) * tl + i) * C + h * c.hs + d], ro[s.At(b, p, h) + d]);
        }
      }
    }
    // Backward with this rank's merged out and lse, block by block.
    std::vector<float> dout_host(size_t(c.b) * tl * C);
    for (int b = 0; b < c.b; ++b) for (int64_t i = 0; i < tl; ++i)
      std::copy_n(&s.dout[s.At(b, mine.Position(i), 0)], C, &dout_host[(size_t(b) * tl + i) * C]);
    Buf dout(c.dt, dout_host);
    const std::vector<float> dq_init = Rand(q_host[r].size(), g, c.dt, 0.5f);
    Buf dq(c.dt, dq_init);
    std::vector<float> scratch(size_t(c.b) * c.nh * tl, 777.f);
    for (int step = 0; step < c.cp; ++step) {
      const int src = order(r, step);
      Buf kv(c.dt, kv_host[src]);
      const weft::cuda::BlockAttentionArgs a{c.b, tl, tl, c.nh, c.hs, qw, kvw, mine, ChunksOf(c, src)};
      Ok(weft::cuda::LaunchAttentionBlockBackward(dq.data(), dkv[src].data(), dout.data(), q.data(),
                                                  kv.data(), out.data(), lse.data(), c.dt, a,
                                                  scratch.data(), nullptr),
         "backward");
    }
    const std::vector<float> got = dq.Get();
    for (int b = 0; b < c.b; ++b) for (int64_t i = 0; i < tl; ++i) {
      const size_t row = (size_t(b) * tl + i) * qw, from = s.At(b, mine.Position(i), 0);
      for (int col = 0; col < qw; ++col) {
        if (col < C) e_dq.Add(got[row + col], dq_init[row + col] + dq_ref[from + col]);
        else untouched += got[row + col] != dq_init[row + col];
      }
    }
  }
  for (int r = 0; r < c.cp; ++r) {
    const TokenChunks theirs = ChunksOf(c, r);
    const std::vector<float> got = dkv[r].Get();
    for (int b = 0; b < c.b; ++b) for (int64_t i = 0; i < tl; ++i) {
      const size_t row = (size_t(b) * tl + i) * kvw, from = s.At(b, theirs.Position(i), 0);
      for (int col = 0; col < kvw; ++col) {
        const size_t at = row + col;
        if (col >= k_col && col < v_col) e_dkv.Add(got[at], dkv_init[r][at] + dk_ref[from + col - k_col]);
        else if (col >= v_col) e_dkv.Add(got[at], dkv_init[r][at] + dv_ref[from + col - v_col]);
        else untouched += got[at] != dkv_init[r][at];
      }
    }
  }
  // f32: expf/logf and f32 sums over at most T keys: 1e-5 (measured about
  // 2e-7). bf16: the inputs are bf16 (exact in the reference) and the math
  // f32, but out, dq and dK/dV are rounded to bf16 at each of the cp
  // blocks' merges or +=, at most 2^-8 relative each: cp * 2^-8. lse stays
  // f32: 1e-5.
  const double tol = c.dt == DType::kBF16 ? c.cp * std::ldexp(1.0, -8) : 1e-5, tol_lse = 1e-5;
  const bool good = e_out.Rel() <= tol && e_lse.Rel() <= tol_lse && e_dq.Rel() <= tol &&
                    e_dkv.Rel() <= tol && untouched == 0;
  printf("%-34s %s: out %.2e lse %.2e dq %.2e dkv %.2e (tol %.1e), other columns changed: %ld %s\n",
         c.name, Name(c.dt), e_out.Rel(), e_lse.Rel(), e_dq.Rel(), e_dkv.Rel(), tol, untouched,
         good ? "ok" : "FAIL");
  return good ? 0 : 1;
}

}  // namespace

int main() {
  int bad = 0;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    // What strategies/cp/ring_attention.cc runs: zigzag chunks of odd
    // length, q = the packed qkv, kv = a (B, T, 2C) K/V block, ring order.
    bad += Run({"zigzag cp=3 len=3 B=2 NH=2 HS=40", dt, 2, 2, 40, 3, 3, true, 3, 2, false});
    // Contiguous chunks, q (B, T, C), kv = a packed qkv, future (fully
    // masked) blocks first: rows with no visible key yet (lse -inf, out 0)
    // merge with visible blocks later, and fully visible blocks.
    bad += Run({"contiguous cp=3 len=5 B=1 NH=2 HS=64", dt, 1, 2, 64, 3, 5, false, 1, 3, true});
  }
  // bf16 with HS 32, 64 or 128 runs the tensor-core kernels
  // (attention_flash_block_*.cu; the contiguous HS=64 case above too): chunks
  // longer than a 64-row tile and not a multiple of it, so tiles straddle
  // chunk ends and Tq, Tk; whole tiles fully visible; rows seeing nothing.
  bad += Run({"flash zigzag cp=2 len=70 NH=2 HS=64", DType::kBF16, 1, 2, 64, 2, 70, true, 3, 2, false});
  bad += Run({"flash contiguous cp=2 len=130 HS=32", DType::kBF16, 2, 1, 32, 2, 130, false, 1, 3, true});
  bad += Run({"flash zigzag cp=2 len=40 HS=128", DType::kBF16, 1, 1, 128, 2, 40, true, 3, 3, true});
  // Head-size edges: fewer dims than lanes; the largest (8 per lane).
  bad += Run({"zigzag cp=2 len=1 B=1 NH=4 HS=8", DType::kF32, 1, 4, 8, 2, 1, true, 3, 3, true});
  bad += Run({"zigzag cp=2 len=3 B=1 NH=1 HS=256", DType::kBF16, 1, 1, 256, 2, 3, true, 3, 2, false});
  printf(bad ? "FAILURES: %d\n" : "all ok\n", bad);
  return bad;
}
