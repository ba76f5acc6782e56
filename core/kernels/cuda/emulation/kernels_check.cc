// Emulated runs of the non-attention kernels against straightforward
// references; see run.sh.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "core/kernels/cuda/cross_entropy.h"
#include "core/kernels/cuda/dropout.h"
#include "core/kernels/cuda/elementwise.h"
#include "core/kernels/cuda/embedding.h"
#include "core/kernels/cuda/layernorm.h"
#include "core/kernels/cuda/matmul_kernels.h"
#include "core/kernels/cuda/optimizer.h"
#include "core/kernels/cuda/reduce.h"
#include "core/kernels/philox.h"
#include "core/kernels/cuda/emulation/check_util.h"

using namespace weft;
using namespace weft::cuda;

#include "core/kernels/cuda/emulation/simple_check.h"

void LayerNorm(int rows, int C) {
  auto x = Rand(rows * C, 1, 3), w = Rand(C, 2), b = Rand(C, 3);
  auto a2 = Rand(rows * C, 5);
  std::vector<double> out(rows * C), mean(rows), rstd(rows);
  for (int r = 0; r < rows; ++r) {
    double m = 0; for (int i = 0; i < C; ++i) m += x[r * C + i]; m /= C;
    double v = 0; for (int i = 0; i < C; ++i) v += (x[r * C + i] - m) * (x[r * C + i] - m); v /= C;
    double s = 1 / std::sqrt(v + 1e-5); mean[r] = m; rstd[r] = s;
    for (int i = 0; i < C; ++i) out[r * C + i] = (x[r * C + i] - m) * s * w[i] + b[i];
  }
  std::vector<float> go(rows * C), gm(rows), gr(rows);
  ok(LaunchLayerNormForward(go.data(), gm.data(), gr.data(), x.data(), w.data(), b.data(), DType::kF32, rows, C, 1e-5f, nullptr));
  char name[80]; snprintf(name, 80, "layernorm fwd %dx%d", rows, C);
  Check(name, std::max({Err(go, out), Err(gm, mean), Err(gr, rstd)}), 1e-5);
  // Residual: x = a2 + (x - a2).
  std::vector<float> bpart(rows * C), res(rows * C), ro(rows * C);
  for (int i = 0; i < rows * C; ++i) bpart[i] = x[i] - a2[i];
  ok(LaunchResidualLayerNormForward(res.data(), ro.data(), gm.data(), gr.data(), a2.data(), bpart.data(), w.data(), b.data(), DType::kF32, rows, C, 1e-5f, nullptr));
  Check("residual layernorm fwd", std::max(Err(ro, out), Err(res, x)), 1e-5);
}

// Backward against a double reference from the same (rounded) inputs.
// residual: 0 none, 1 dx itself (accumulate onto dx's old values), 2 another
// tensor (must stay unchanged), 3 another tensor with dx written over dy.
// Parameter gradients start at 0.25 (+=).
// `offset` shifts every row-major operand by one element, which forces the
// scalar path; dweight/dbias must then equal the vector path's bit for bit
// (same rows per warp, same warp and block order).
template <typename G>
struct LnBwdResult { std::vector<G> dw, db; };
template <typename T, typename G>
LnBwdResult<G> LayerNormBackwardCase(int rows, int C, int residual, int offset = 0) {
  const size_t n = size_t(rows) * C;
  std::vector<T> x(n + 1), dy(n + 1), res(n + 1), dx(n + 1), w(C);
  auto fx = Rand(n, 1, 3), fdy = Rand(n, 4), fres = Rand(n, 5), fdx = Rand(n, 6), fw = Rand(C, 2);
  for (size_t i = 0; i < n; ++i) {
    x[i + offset] = HostFromF<T>(fx[i]); dy[i + offset] = HostFromF<T>(fdy[i]);
    res[i + offset] = HostFromF<T>(fres[i]); dx[i + offset] = HostFromF<T>(fdx[i]);
  }
  for (int i = 0; i < C; ++i) w[i] = HostFromF<T>(fw[i]);
  std::vector<float> mf(rows), rf(rows);
  std::vector<double> want_dx(n), want_dw(C, 0.25), want_db(C, 0.25);
  for (int r = 0; r < rows; ++r) {
    auto X = [&](int i) { return double(AsF(x[offset + size_t(r) * C + i])); };
    auto DY = [&](int i) { return double(AsF(dy[offset + size_t(r) * C + i])); };
    double m = 0; for (int i = 0; i < C; ++i) m += X(i); m /= C;
    double v = 0; for (int i = 0; i < C; ++i) v += (X(i) - m) * (X(i) - m); v /= C;
    mf[r] = float(m); rf[r] = float(1 / std::sqrt(v + 1e-5));
    const double s = rf[r];
    double s1 = 0, s2 = 0;
    for (int i = 0; i < C; ++i) {
      const double xh = (X(i) - mf[r]) * s, dyw = DY(i) * AsF(w[i]);
      s1 += dyw; s2 += dyw * xh; want_dw[i] += DY(i) * xh; want_db[i] += DY(i);
    }
    s1 /= C; s2 /= C;
    for (int i = 0; i < C; ++i) {
      const double xh = (X(i) - mf[r]) * s;
      const size_t k = offset + size_t(r) * C + i;
      const double base = residual == 1 ? AsF(dx[k]) : residual >= 2 ? AsF(res[k]) : 0.0;
      want_dx[size_t(r) * C + i] = base + (DY(i) * AsF(w[i]) - s1 - xh * s2) * s;
    }
  }
  const std::vector<T> res_before = res;
  std::vector<G> dw(C, HostFromF<G>(0.25f)), db(C, HostFromF<G>(0.25f));
  std::vector<float> scratch(LayerNormBackwardScratchFloats(rows, C));
  const void* rp = residual == 1 ? dx.data() + offset : residual >= 2 ? res.data() + offset : nullptr;
  std::vector<T>& out = residual == 3 ? dy : dx;
  const DType dt = sizeof(T) == 2 ? DType::kBF16 : DType::kF32;
  const DType gt = sizeof(G) == 2 ? DType::kBF16 : DType::kF32;
  ok(LaunchLayerNormBackward(out.data() + offset, dw.data(), db.data(), gt, dy.data() + offset, rp,
                             x.data() + offset, w.data(), mf.data(), rf.data(), dt, rows, C,
                             scratch.data(), nullptr));
  std::vector<float> got_dx(n), got_dw(C), got_db(C);
  for (size_t i = 0; i < n; ++i) got_dx[i] = AsF(out[i + offset]);
  for (int i = 0; i < C; ++i) { got_dw[i] = AsF(dw[i]); got_db[i] = AsF(db[i]); }
  char name[120];
  snprintf(name, 120, "layernorm bwd %s %dx%d res=%s grads %s%s dx", sizeof(T) == 2 ? "bf16" : "f32",
           rows, C, residual == 0 ? "none" : residual == 1 ? "dx" : residual == 2 ? "other" : "other, dx=dy", sizeof(G) == 2 ? "bf16" : "f32",
           offset ? " scalar" : "");
  const double tol = sizeof(T) == 2 ? 1e-2 : 1e-5;
  Check(name, Err(got_dx, want_dx), tol);
  snprintf(name + strlen(name) - 2, 40, "dw/db");
  Check(name, std::max(Err(got_dw, want_dw), Err(got_db, want_db)), sizeof(G) == 2 ? 1e-2 : 1e-5);
  if (residual >= 2 && std::memcmp(res.data(), res_before.data(), res.size() * sizeof(T)) != 0) { printf("  residual was modified: FAIL\n"); ++bad; }
  return {dw, db};
}

void LayerNormBackwardChecks() {
  for (int C : {13, 96, 100, 768}) {
    for (int residual : {0, 1, 2}) {
      LayerNormBackwardCase<float, float>(37, C, residual);
      LayerNormBackwardCase<__nv_bfloat16, float>(37, C, residual);
    }
  }
  LayerNormBackwardCase<__nv_bfloat16, __nv_bfloat16>(20, 768, 1);
  LayerNormBackwardCase<float, __nv_bfloat16>(9, 100, 0);
  LayerNormBackwardCase<__nv_bfloat16, float>(23, 1600, 2);  // 6 warps per block
  LayerNormBackwardCase<__nv_bfloat16, float>(3, 4100, 1);   // 2 warps; warp 0 takes 2 rows
  LayerNormBackwardCase<float, float>(8200, 8, 1);           // 512+ rows per chunk: 24-row chunks
  LayerNormBackwardCase<__nv_bfloat16, float>(1, 768, 0);
  LayerNormBackwardCase<__nv_bfloat16, float>(37, 768, 3);
  LayerNormBackwardCase<float, float>(37, 13, 3);
  // Vector and scalar paths sum dweight/dbias in the same order.
  for (int C : {96, 768}) {
    auto vec = LayerNormBackwardCase<float, float>(50, C, 2);
    auto sca = LayerNormBackwardCase<float, float>(50, C, 2, /*offset=*/1);
    const bool same = vec.dw == sca.dw && vec.db == sca.db;
    printf("%-40s %s\n", "  vector == scalar dw/db, bitwise", same ? "ok" : "FAIL");
    bad += !same;
  }
}

// Rows kept in registers against rows reread each sweep (WEFT_LN_KERNEL):
// forward, residual forward and backward (in place over dx's old values,
// and with dx written over dy) give the same bits.
// Past 4 steps (1024 bf16 / 512 f32 channels) the backward rereads: a
// forced `resident` backward must then fail, and only the forwards compare.
template <typename T>
void LayerNormKernelsAgree(int rows, int C) {
  const bool bwd_resident = C <= 4 * 32 * (16 / int(sizeof(T)));
  const size_t n = size_t(rows) * C;
  const DType dt = sizeof(T) == 2 ? DType::kBF16 : DType::kF32;
  auto host = [](const std::vector<float>& v) {
    std::vector<T> h(v.size()); for (size_t i = 0; i < v.size(); ++i) h[i] = HostFromF<T>(v[i]); return h;
  };
  const std::vector<T> x = host(Rand(n, 31, 3)), a = host(Rand(n, 32, 2)), w = host(Rand(C, 33)),
                       b = host(Rand(C, 34)), dy = host(Rand(n, 35)), dx0 = host(Rand(n, 36));
  struct Outputs { std::vector<T> out, res, rout, dx, dx_over_dy; std::vector<float> mean, rstd, rmean, grads; };
  Outputs o[2];
  const char* kernels[2] = {"reread", "resident"};
  for (int k = 0; k < 2; ++k) {
    setenv("WEFT_LN_KERNEL", kernels[k], 1);
    Outputs& r = o[k];
    r.out.resize(n); r.res.resize(n); r.rout.resize(n); r.mean.resize(rows); r.rstd.resize(rows); r.rmean.resize(2 * rows);
    ok(LaunchLayerNormForward(r.out.data(), r.mean.data(), r.rstd.data(), x.data(), w.data(), b.data(), dt, rows, C, 1e-5f, nullptr));
    ok(LaunchResidualLayerNormForward(r.res.data(), r.rout.data(), r.rmean.data(), r.rmean.data() + rows, a.data(), x.data(), w.data(), b.data(), dt, rows, C, 1e-5f, nullptr));
    r.dx = dx0; r.dx_over_dy = dy;
    r.grads.assign(4 * C, 0.5f);
    std::vector<float> scratch(LayerNormBackwardScratchFloats(rows, C));
    const absl::Status b1 = LaunchLayerNormBackward(r.dx.data(), r.grads.data(), r.grads.data() + C, DType::kF32, dy.data(), r.dx.data(), x.data(), w.data(), r.mean.data(), r.rstd.data(), dt, rows, C, scratch.data(), nullptr);
    const absl::Status b2 = LaunchLayerNormBackward(r.dx_over_dy.data(), r.grads.data() + 2 * C, r.grads.data() + 3 * C, DType::kF32, r.dx_over_dy.data(), nullptr, x.data(), w.data(), r.mean.data(), r.rstd.data(), dt, rows, C, scratch.data(), nullptr);
    if (k == 1 && !bwd_resident) {
      Check("layernorm resident backward refused past 4 steps", absl::IsInvalidArgument(b1) && absl::IsInvalidArgument(b2) ? 0 : 1, 0);
      r.dx = o[0].dx; r.dx_over_dy = o[0].dx_over_dy; r.grads = o[0].grads;  // nothing to compare
    } else {
      ok(b1); ok(b2);
    }
  }
  unsetenv("WEFT_LN_KERNEL");
  auto same = [](const auto& p, const auto& q) { return p.size() == q.size() && std::memcmp(p.data(), q.data(), p.size() * sizeof(p[0])) == 0; };
  const bool equal = same(o[0].out, o[1].out) && same(o[0].mean, o[1].mean) && same(o[0].rstd, o[1].rstd) &&
                     same(o[0].res, o[1].res) && same(o[0].rout, o[1].rout) && same(o[0].rmean, o[1].rmean) &&
                     same(o[0].dx, o[1].dx) && same(o[0].dx_over_dy, o[1].dx_over_dy) && same(o[0].grads, o[1].grads);
  char what[80];
  snprintf(what, sizeof(what), "layernorm resident == reread %s %dx%d%s", dt == DType::kBF16 ? "bf16" : "f32", rows, C, bwd_resident ? "" : " (forward)");
  Check(what, equal ? 0 : 1, 0);
}

// A forced `resident` where the row cannot stay in registers is an error.
void LayerNormResidentRefusal() {
  std::vector<float> x(2 * 13, 1.0f), w(13, 1.0f), out(2 * 13), m(2), r(2);
  setenv("WEFT_LN_KERNEL", "resident", 1);
  const absl::Status st = LaunchLayerNormForward(out.data(), m.data(), r.data(), x.data(), w.data(), nullptr, DType::kF32, 2, 13, 1e-5f, nullptr);
  unsetenv("WEFT_LN_KERNEL");
  std::vector<float> wide_x(2 * 1100, 1.0f), wide_w(1100, 1.0f), wide_out(2 * 1100);
  setenv("WEFT_LN_KERNEL", "resident", 1);
  const absl::Status wide = LaunchLayerNormForward(wide_out.data(), m.data(), r.data(), wide_x.data(), wide_w.data(), nullptr, DType::kF32, 2, 1100, 1e-5f, nullptr);
  unsetenv("WEFT_LN_KERNEL");
  Check("layernorm resident refused on scalar rows", absl::IsInvalidArgument(st) ? 0 : 1, 0);
  Check("layernorm resident refused past 8 steps", absl::IsInvalidArgument(wide) ? 0 : 1, 0);
}

void ColumnSum(int rows, int cols) {
  auto dy = Rand(rows * cols, 7);
  std::vector<double> want(cols, 1.0);
  for (int r = 0; r < rows; ++r) for (int c = 0; c < cols; ++c) want[c] += dy[r * cols + c];
  std::vector<float> got(cols, 1.0f), scratch(ColumnSumScratchFloats(rows, cols));
  ok(LaunchColumnSum(got.data(), DType::kF32, dy.data(), DType::kF32, rows, cols, scratch.data(), nullptr));
  Check("column sum", Err(got, want), 1e-5);
}

// Double-precision softmax cross-entropy of rows x V logits (row stride
// Vp) and its gradient scaled by 0.25; a target < 0 is ignored.
template <typename Target>
void ReferenceCrossEntropy(const std::vector<float>& z, const std::vector<Target>& tg, int rows,
                           int V, int Vp, std::vector<double>& loss, std::vector<double>& grad) {
  for (int r = 0; r < rows; ++r) {
    if (tg[r] < 0) continue;
    double m = -1e300; for (int j = 0; j < V; ++j) m = std::max(m, double(z[r * Vp + j]));
    double s = 0; for (int j = 0; j < V; ++j) s += std::exp(z[r * Vp + j] - m);
    double lse = m + std::log(s); loss[r] = lse - z[r * Vp + tg[r]];
    for (int j = 0; j < V; ++j) grad[r * Vp + j] = 0.25 * (std::exp(z[r * Vp + j] - lse) - (j == tg[r]));
  }
}

void CrossEntropy(int rows, int V, int Vp, bool bf) {
  auto z = Rand(rows * Vp, 8, 4);
  std::vector<int> tg(rows); for (int r = 0; r < rows; ++r) tg[r] = (r * 7919) % V;
  tg[rows / 2] = -1;
  std::vector<double> loss(rows, 0), grad(rows * Vp, 0);
  ReferenceCrossEntropy(z, tg, rows, V, Vp, loss, grad);
  std::vector<float> gl(rows);
  std::vector<int32_t> t32(tg.begin(), tg.end());
  if (!bf) {
    std::vector<float> g = z;
    ok(LaunchCrossEntropy(gl.data(), g.data(), DType::kF32, t32.data(), rows, V, Vp, 0.25f, true, nullptr));
    std::vector<double> gr_nt, want_nt;  // non-target entries
    for (int r = 0; r < rows; ++r) for (int j = 0; j < Vp; ++j) if (j != tg[r]) { gr_nt.push_back(g[r*Vp+j]); want_nt.push_back(grad[r*Vp+j]); }
    Check("cross entropy f32 loss/grad", std::max({Err(gl, loss), Err(g, grad), Err(gr_nt, want_nt)}), 1e-5);
  } else {
    std::vector<__nv_bfloat16> g(z.size());
    for (size_t i = 0; i < z.size(); ++i) g[i] = __float2bfloat16_rn(z[i]);
    ok(LaunchCrossEntropy(gl.data(), g.data(), DType::kBF16, t32.data(), rows, V, Vp, 0.25f, false, nullptr));
    Check("cross entropy bf16 loss (no grad)", Err(gl, loss), 2e-2);
  }
}

// The resident cross-entropy kernel (row copied to shared memory once)
// against the two-pass one: the same losses and gradients bit for bit, with
// an ignored row, a target in the last real column and -inf logits (a
// masked vocabulary). WEFT_CE_KERNEL picks the kernel.
template <typename T>
void CrossEntropyKernelsAgree(int rows, int V, int Vp, bool grad) {
  auto z = Rand(size_t(rows) * Vp, 17, 6);
  for (int j = 3; j < V; j += 97) z[j] = -INFINITY;  // row 0: some columns masked
  std::vector<int32_t> tg(rows);
  for (int r = 0; r < rows; ++r) tg[r] = (r * 7919 + 5) % V;
  tg[rows - 1] = V - 1;
  if (rows > 2) tg[1] = -1;
  std::vector<T> a(z.size()), b(z.size());
  for (size_t i = 0; i < z.size(); ++i) a[i] = b[i] = HostFromF<T>(z[i]);
  std::vector<float> la(rows, 7), lb(rows, 9);
  const DType dt = sizeof(T) == 2 ? DType::kBF16 : DType::kF32;
  setenv("WEFT_CE_KERNEL", "two-pass", 1);
  ok(LaunchCrossEntropy(la.data(), a.data(), dt, tg.data(), rows, V, Vp, 0.125f, grad, nullptr));
  setenv("WEFT_CE_KERNEL", "resident", 1);
  ok(LaunchCrossEntropy(lb.data(), b.data(), dt, tg.data(), rows, V, Vp, 0.125f, grad, nullptr));
  unsetenv("WEFT_CE_KERNEL");
  const bool same = std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0 &&
                    std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
  char what[80];
  snprintf(what, sizeof(what), "ce resident == two-pass %s %dx%d/%d%s", dt == DType::kBF16 ? "bf16" : "f32",
           rows, V, Vp, grad ? "" : " (loss only)");
  Check(what, same ? 0 : 1, 0);
}

// Forcing the resident kernel where it cannot run is an error, not a
// silent fallback: rows that are not a whole number of 16-byte vectors.
void CrossEntropyResidentRefusal() {
  std::vector<float> z(3 * 13, 0.5f), l(3);
  std::vector<int32_t> tg = {0, 1, 2};
  setenv("WEFT_CE_KERNEL", "resident", 1);
  const absl::Status st = LaunchCrossEntropy(l.data(), z.data(), DType::kF32, tg.data(), 3, 13, 13, 1.0f, true, nullptr);
  setenv("WEFT_CE_KERNEL", "fastest", 1);
  std::vector<float> z2(3 * 16, 0.5f);
  const absl::Status st2 = LaunchCrossEntropy(l.data(), z2.data(), DType::kF32, tg.data(), 3, 13, 16, 1.0f, true, nullptr);
  unsetenv("WEFT_CE_KERNEL");
  Check("ce resident refused on unaligned rows", absl::IsInvalidArgument(st) ? 0 : 1, 0);
  Check("ce unknown WEFT_CE_KERNEL refused", absl::IsInvalidArgument(st2) ? 0 : 1, 0);
}

void Reductions() {
  std::vector<std::vector<float>> ts; std::vector<ReduceInput> in; double want = 0;
  for (int i = 0; i < 150; ++i) {
    int n = i % 7 == 0 ? 0 : (i * 977) % 9000 + 1;
    ts.push_back(Rand(n, 100 + i));
  }
  for (auto& t : ts) { in.push_back({t.data(), DType::kF32, (int64_t)t.size()}); for (float v : t) want += double(v) * v; }
  std::vector<float> scratch(SumSquaresScratchFloats(in)); float out = 7;
  ok(LaunchSumSquares(&out, in, scratch.data(), nullptr));
  Check("sum squares (150 tensors)", std::fabs(out - want) / want, 1e-5);
  auto x = Rand(100003, 9); double s = 0.5; for (float v : x) s += v;
  std::vector<float> sc(SumScratchFloats(x.size())); float o = 0.5f;
  ok(LaunchSum(&o, x.data(), DType::kF32, x.size(), true, sc.data(), nullptr));
  Check("sum (accumulate)", std::fabs(o - s) / std::max(1.0, std::fabs(s)), 1e-5);
}

void Optimizers() {
  std::vector<std::vector<float>> w, g, m, v; std::vector<std::vector<__nv_bfloat16>> p;
  std::vector<OptimizerTensor> ts;
  int segs = 70;
  for (int i = 0; i < segs; ++i) {
    int n = i % 9 == 4 ? 0 : (i * 1237) % 9000 + 1;
    w.push_back(Rand(n, 1000 + i)); g.push_back(Rand(n, 2000 + i, 0.5f));
    m.push_back(std::vector<float>(n, 0)); v.push_back(std::vector<float>(n, 0)); p.push_back(std::vector<__nv_bfloat16>(n));
  }
  auto w0 = w;
  for (int i = 0; i < segs; ++i) {
    OptimizerTensor t; t.master = w[i].data(); t.param = p[i].data(); t.param_dtype = DType::kBF16;
    t.grad = g[i].data(); t.exp_avg = m[i].data(); t.exp_avg_sq = v[i].data(); t.n = w[i].size(); t.weight_decay = i % 4 != 0;
    ts.push_back(t);
  }
  float nsq = 40.0f;
  AdamWConfig c{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 2.0f, 1 - 0.9f, 1 - 0.95f, &nsq};
  ok(LaunchAdamW(ts, c, nullptr));
  double e = 0; bool param_ok = true;
  const float clip = std::min(1.0f, 2.0f / (std::sqrt(40.0f) + 1e-6f));
  for (int i = 0; i < segs; ++i) for (size_t k = 0; k < w[i].size(); ++k) {
    float gg = g[i][k] * (0.5f * clip);
    float mm = 0.1f * gg, vv = 0.05f * gg * gg;
    float mh = mm / 0.1f, vh = vv / 0.05f;
    float ww = w0[i][k];
    ww -= 1e-2f * (mh / (std::sqrt(vh) + 1e-8f) + (i % 4 != 0 ? 0.1f : 0.f) * ww);
    e = std::max(e, std::fabs(double(ww) - w[i][k]));
    e = std::max(e, std::fabs(double(mm) - m[i][k]) + std::fabs(double(vv) - v[i][k]));
    if (__bfloat162float(p[i][k]) != __bfloat162float(__float2bfloat16_rn(w[i][k]))) param_ok = false;
  }
  Check("adamw (70 segments, clipped)", e, 1e-6);
  Check("adamw bf16 param copy", param_ok ? 0 : 1, 0);
  // A graph replay's update: lr and bias corrections read from memory, the
  // config's own fields ignored; bitwise the by-value update.
  auto w2 = w0; std::vector<std::vector<float>> m2, v2; std::vector<std::vector<__nv_bfloat16>> p2;
  std::vector<OptimizerTensor> ts2 = ts;
  for (int i = 0; i < segs; ++i) {
    m2.push_back(std::vector<float>(w0[i].size(), 0)); v2.push_back(m2.back());
    p2.push_back(std::vector<__nv_bfloat16>(w0[i].size()));
    ts2[i].master = w2[i].data(); ts2[i].exp_avg = m2[i].data(); ts2[i].exp_avg_sq = v2[i].data(); ts2[i].param = p2[i].data();
  }
  const float scalars[3] = {1e-2f, 1 - 0.9f, 1 - 0.95f};
  AdamWConfig cm{-7.f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 2.0f, 3.f, 5.f, &nsq, scalars};
  ok(LaunchAdamW(ts2, cm, nullptr));
  int64_t differ = 0;
  for (int i = 0; i < segs; ++i) for (size_t k = 0; k < w[i].size(); ++k) {
    differ += w2[i][k] != w[i][k] || m2[i][k] != m[i][k] || v2[i][k] != v[i][k] ||
              __bfloat162float(p2[i][k]) != __bfloat162float(p[i][k]);
  }
  Check("adamw step scalars from memory == by value (values differing)", double(differ), 0);
}

void Sgd() {
  const int n = 5000;
  auto w = Rand(n, 21), g = Rand(n, 22), buf = Rand(n, 23, 0.1f);
  auto w0 = w, buf0 = buf;
  std::vector<float> p(n);
  OptimizerTensor t;
  t.master = w.data(); t.param = p.data(); t.param_dtype = DType::kF32;
  t.grad = g.data(); t.exp_avg = buf.data(); t.n = n; t.weight_decay = true;
  SgdConfig c{0.05f, 0.9f, 0.01f, 2.0f, 0.0f, true, nullptr};
  std::vector<OptimizerTensor> ts{t};
  ok(LaunchSgd(ts, c, nullptr));
  double e = 0;
  for (int i = 0; i < n; ++i) {
    float gg = g[i] * 2.0f + 0.01f * w0[i];
    float b = 0.9f * buf0[i] + gg;
    float ww = w0[i] - 0.05f * (gg + 0.9f * b);
    e = std::max({e, (double)std::fabs(ww - w[i]), (double)std::fabs(b - buf[i]), (double)std::fabs(p[i] - w[i])});
  }
  Check("sgd nesterov", e, 1e-6);
  auto w2 = w0, buf2 = buf0; std::vector<float> p2(n);
  OptimizerTensor t2 = t; t2.master = w2.data(); t2.param = p2.data(); t2.exp_avg = buf2.data();
  const float lr = 0.05f;
  SgdConfig cm{-3.f, 0.9f, 0.01f, 2.0f, 0.0f, true, nullptr, &lr};
  std::vector<OptimizerTensor> ts2{t2};
  ok(LaunchSgd(ts2, cm, nullptr));
  int64_t differ = 0;
  for (int i = 0; i < n; ++i) differ += w2[i] != w[i] || buf2[i] != buf[i] || p2[i] != p[i];
  Check("sgd lr from memory == by value (values differing)", double(differ), 0);
}

void Dropout() {
  int n = 1001; auto x = Rand(n, 11); std::vector<float> y(n);
  // Samples of 13 elements from offset 5: the f32 scalar path crosses sample ends.
  const DropoutKey key{.seed = 99, .offset = 5, .sample_size = 13, .first_sample = 2, .sample_stride = 4};
  ok(LaunchDropout(y.data(), x.data(), DType::kF32, n, 0.3f, key, nullptr));
  double e = 0; const float ks = 1.0f / (1.0f - 0.3f);
  for (int i = 0; i < n; ++i) e = std::max(e, (double)std::fabs(y[i] - (DropoutKeepAt(99, 2 + 4 * ((5 + i) / 13), (5 + i) % 13, 0.3f) ? x[i] * ks : 0.f)));
  Check("dropout f32 bitwise", e, 0);
  std::vector<float> x8 = Rand(1024, 12), y8(1024);
  // The 4-wide vector path with samples of 6: vectors straddle sample ends.
  ok(LaunchDropout(y8.data(), x8.data(), DType::kF32, 1024, 0.5f, {.seed = 7, .sample_size = 6, .first_sample = 1, .sample_stride = 2}, nullptr));
  e = 0; for (int i = 0; i < 1024; ++i) e = std::max(e, (double)std::fabs(y8[i] - (DropoutKeepAt(7, 1 + 2 * (i / 6), i % 6, 0.5f) ? x8[i] * 2.0f : 0.f)));
  Check("dropout f32 vector path bitwise", e, 0);
  // The step's seed read from memory (a CUDA graph replay): the same masks.
  const uint64_t step_seed = 7 ^ 0x5a5a;
  std::vector<float> y9(1024);
  ok(LaunchDropout(y9.data(), x8.data(), DType::kF32, 1024, 0.5f, {.seed = 0x5a5a, .sample_size = 6, .first_sample = 1, .sample_stride = 2, .seed_in_memory = &step_seed}, nullptr));
  e = 0; for (int i = 0; i < 1024; ++i) e = std::max(e, (double)std::fabs(y9[i] - y8[i]));
  Check("dropout seed from memory == by value", e, 0);
}

void Gelu() {
  int n = 1024; auto x = Rand(n, 13, 4); std::vector<float> y(n), dx(n); auto dy = Rand(n, 14);
  ok(LaunchGeluForward(y.data(), x.data(), DType::kF32, n, nullptr));
  ok(LaunchGeluBackward(dx.data(), dy.data(), x.data(), DType::kF32, n, nullptr));
  double e = 0;
  for (int i = 0; i < n; ++i) {
    double xx = x[i], u = 0.7978845608028654 * (xx + 0.044715 * xx * xx * xx), t = std::tanh(u);
    double gl = 0.5 * xx * (1 + t), gg = 0.5 * (1 + t) + 0.5 * xx * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * xx * xx);
    e = std::max({e, std::fabs(y[i] - gl) / 4, std::fabs(dx[i] - dy[i] * gg)});
  }
  Check("gelu fwd/bwd", e, 1e-5);
}

void Embedding() {
  for (int C : {768, 13}) {
    const int B = 3, T = 37, V = 50, maxT = 64;
    std::mt19937 g(1); std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> wte(V * C), wpe(maxT * C), dout(B * T * C);
    for (auto& x : wte) x = u(g); for (auto& x : wpe) x = u(g); for (auto& x : dout) x = u(g);
    std::vector<int32_t> tok(B * T); for (int i = 0; i < B * T; ++i) tok[i] = int(u(g) * u(g) * V + V) % V;
    tok[5] = V + 3;  // invalid
    std::vector<float> out(B * T * C);
    auto st = LaunchEmbeddingForward(out.data(), tok.data(), wte.data(), wpe.data(), DType::kF32, B, T, C, V, nullptr);
    double e = 0;
    for (int i = 0; i < B * T; ++i) for (int c = 0; c < C; ++c) {
      if (i == 5) { if (!std::isnan(out[i * C + c])) e = 1; continue; }
      e = std::max(e, (double)std::fabs(out[i * C + c] - (wte[tok[i] * C + c] + wpe[(i % T) * C + c])));
    }
    printf("embedding fwd C=%d err %.2e\n", C, e); bad += e > 0 ? 1 : 0;
    std::vector<float> dwte(V * C, 0.25f), dwpe(maxT * C, 0.5f);
    std::vector<double> rwte(V * C, 0.25), rwpe(maxT * C, 0.5);
    for (int i = 0; i < B * T; ++i) for (int c = 0; c < C; ++c) {
      if (i != 5) rwte[tok[i] * C + c] += dout[i * C + c];
      rwpe[(i % T) * C + c] += dout[i * C + c];
    }
    size_t bytes = *EmbeddingBackwardScratchBytes(B * T, V);
    std::vector<char> scratch(bytes + 256);
    char* s = scratch.data() + (256 - reinterpret_cast<uintptr_t>(scratch.data()) % 256) % 256;
    st = LaunchEmbeddingBackward(dwte.data(), dwpe.data(), DType::kF32, dout.data(), DType::kF32, tok.data(), B, T, C, V, 0, s, bytes, nullptr);
    if (!st.ok()) { printf("%s\n", std::string(st.message()).c_str()); ++bad; return; }
    e = 0;
    for (int i = 0; i < V * C; ++i) e = std::max(e, std::fabs(dwte[i] - rwte[i]));
    for (int i = 0; i < maxT * C; ++i) e = std::max(e, std::fabs(dwpe[i] - rwpe[i]));
    printf("embedding bwd C=%d err %.2e\n", C, e); bad += e > 1e-5;
  }
}

// The vocabulary-parallel loss over `shards` column blocks (the all-reduces
// done here) against the double reference; one shard must equal the fused
// kernel bit for bit.

template <typename T>
void VocabCrossEntropy(int rows, int V, int Vp, int shards) {
  const bool bf = sizeof(T) == 2;
  auto z = Rand(rows * Vp, 18, 4);
  std::vector<T> zt(z.size());
  for (size_t i = 0; i < z.size(); ++i) { zt[i] = HostFromF<T>(z[i]); z[i] = AsF(zt[i]); }
  std::vector<int32_t> tg(rows); for (int r = 0; r < rows; ++r) tg[r] = (r * 7919) % V;
  tg[rows / 2] = -1; tg[rows - 1] = V - 1;
  const DType dt = bf ? DType::kBF16 : DType::kF32;
  std::vector<double> loss(rows, 0), grad(rows * Vp, 0);
  ReferenceCrossEntropy(z, tg, rows, V, Vp, loss, grad);
  const int w = Vp / shards;
  std::vector<std::vector<T>> zs(shards);
  std::vector<std::vector<float>> mx(shards, std::vector<float>(rows)), se = mx, tl = mx;
  std::vector<float> gmax(rows, -INFINITY), sum(rows, 0), tsum(rows, 0), gl(rows);
  for (int s = 0; s < shards; ++s) {
    for (int r = 0; r < rows; ++r) zs[s].insert(zs[s].end(), zt.begin() + r * Vp + s * w, zt.begin() + r * Vp + (s + 1) * w);
    VocabShardArgs a{tg.data(), dt, rows, w, int64_t(s) * w, V};
    ok(LaunchVocabCrossEntropyStats(a, zs[s].data(), mx[s].data(), se[s].data(), tl[s].data(), nullptr));
    for (int r = 0; r < rows; ++r) gmax[r] = std::max(gmax[r], mx[s][r]);
  }
  for (int s = 0; s < shards; ++s) {
    ok(LaunchVocabCrossEntropyRescale(se[s].data(), mx[s].data(), gmax.data(), rows, nullptr));
    for (int r = 0; r < rows; ++r) { sum[r] += se[s][r]; tsum[r] += tl[s][r]; }
  }
  std::vector<double> g(rows * Vp);
  for (int s = 0; s < shards; ++s) {
    VocabShardArgs a{tg.data(), dt, rows, w, int64_t(s) * w, V};
    std::vector<float> l(rows);
    ok(LaunchVocabCrossEntropyFinish(a, zs[s].data(), l.data(), gmax.data(), sum.data(), tsum.data(), 0.25f, true, nullptr));
    std::vector<float> l2(rows);
    ok(LaunchVocabCrossEntropyFinish(a, zs[s].data(), l2.data(), gmax.data(), sum.data(), tsum.data(), 0.25f, false, nullptr));
    if (l2 != l) { printf("vocab ce: losses without grad differ\n"); ++bad; }
    if (s == 0) gl = l;
    for (int r = 0; r < rows; ++r) for (int j = 0; j < w; ++j) g[r * Vp + s * w + j] = AsF(zs[s][r * w + j]);
  }
  char what[96];
  snprintf(what, sizeof what, "vocab ce %s V=%d/%d x%d", bf ? "bf16" : "f32", V, Vp, shards);
  Check(what, std::max(Err(gl, loss), Err(g, grad)), bf ? 1e-2 : 1e-5);
  if (shards == 1) {  // bitwise the fused kernel
    std::vector<T> fz = zt; std::vector<float> fl(rows);
    ok(LaunchCrossEntropy(fl.data(), fz.data(), dt, tg.data(), rows, V, Vp, 0.25f, true, nullptr));
    bool same = fl == gl;
    for (size_t i = 0; i < fz.size(); ++i) same = same && AsF(fz[i]) == AsF(zs[0][i]);
    printf("%-40s %s\n", "  one shard == fused, bitwise", same ? "ok" : "FAIL"); bad += !same;
  }
}

void VocabEmbedding() {
  const int B = 2, T = 9, C = 16, rows = 24, shards = 3, w = rows / shards;
  auto wte = Rand(rows * C, 21), wpe = Rand(T * C, 22), dout = Rand(B * T * C, 23);
  std::vector<int32_t> tok(B * T); for (int i = 0; i < B * T; ++i) tok[i] = (i * 13) % rows;
  tok[3] = tok[4] = 7;  // repeated: summed in position order
  std::vector<float> sum(B * T * C, 0), dwte(rows * C, 0.25f), dwpe(T * C, 0.5f);
  double e = 0;
  for (int s = 0; s < shards; ++s) {
    std::vector<float> out(B * T * C), dpe(T * C, 0.5f);
    ok(LaunchVocabEmbeddingForward(out.data(), tok.data(), wte.data() + s * w * C, s == 0 ? wpe.data() : nullptr, DType::kF32, B, T, C, w, s * w, nullptr));
    for (size_t i = 0; i < out.size(); ++i) sum[i] += out[i];
    size_t bytes = *EmbeddingBackwardScratchBytes(B * T, w);
    std::vector<char> scratch(bytes + 256);
    char* sp = scratch.data() + (256 - reinterpret_cast<uintptr_t>(scratch.data()) % 256) % 256;
    ok(LaunchEmbeddingBackward(dwte.data() + s * w * C, dpe.data(), DType::kF32, dout.data(), DType::kF32, tok.data(), B, T, C, w, s * w, sp, bytes, nullptr));
    if (s == 0) dwpe = dpe;
    else for (int i = 0; i < T * C; ++i) e = std::max(e, double(std::fabs(dpe[i] - dwpe[i])));
  }
  std::vector<double> rwte(rows * C, 0.25), rwpe(T * C, 0.5);
  for (int i = 0; i < B * T; ++i) for (int c = 0; c < C; ++c) {
    e = std::max(e, double(std::fabs(sum[i * C + c] - (wte[tok[i] * C + c] + wpe[(i % T) * C + c]))));
    rwte[tok[i] * C + c] += dout[i * C + c]; rwpe[(i % T) * C + c] += dout[i * C + c];
  }
  for (int i = 0; i < rows * C; ++i) e = std::max(e, std::fabs(dwte[i] - rwte[i]));
  for (int i = 0; i < T * C; ++i) e = std::max(e, std::fabs(dwpe[i] - rwpe[i]));
  Check("vocab embedding fwd/bwd x3 shards", e, 1e-5);
}

int main() {
  LayerNorm(37, 13); LayerNorm(20, 768); LayerNorm(9, 96); LayerNormBackwardChecks();
  LayerNormKernelsAgree<float>(37, 96); LayerNormKernelsAgree<float>(21, 768);
  LayerNormKernelsAgree<__nv_bfloat16>(37, 768); LayerNormKernelsAgree<__nv_bfloat16>(9, 1024);
  LayerNormKernelsAgree<__nv_bfloat16>(9, 1600); LayerNormKernelsAgree<float>(7, 512);
  LayerNormKernelsAgree<__nv_bfloat16>(5, 2048);
  LayerNormResidentRefusal();
  ColumnSum(300, 37); ColumnSum(1000, 64);
  CrossEntropy(4, 65, 128, false); CrossEntropy(3, 13, 13, false); CrossEntropy(2, 50257, 50304, false);
  CrossEntropy(3, 50257, 50304, true);
  CrossEntropyKernelsAgree<float>(5, 61, 64, true); CrossEntropyKernelsAgree<float>(3, 200, 1024, false);
  CrossEntropyKernelsAgree<__nv_bfloat16>(3, 50257, 50304, true);
  CrossEntropyKernelsAgree<float>(2, 50257, 50304, true);  // resident only when forced (201 KB)
  CrossEntropyResidentRefusal();
  Reductions(); Optimizers(); Sgd(); Dropout(); Gelu(); Embedding();
  for (int shards : {1, 2, 4}) {
    VocabCrossEntropy<float>(5, 61, 64, shards); VocabCrossEntropy<__nv_bfloat16>(5, 61, 64, shards);
    VocabCrossEntropy<float>(3, 5, 16, shards);  // shards of padding only
  }
  VocabCrossEntropy<float>(3, 13, 13, 1);  // no vector path
  VocabCrossEntropy<float>(2, 50257, 50304, 2); VocabCrossEntropy<__nv_bfloat16>(2, 50257, 50304, 1);
  VocabEmbedding();
  printf(bad ? "FAILURES: %d\n" : "all ok\n", bad);
  return bad;
}
