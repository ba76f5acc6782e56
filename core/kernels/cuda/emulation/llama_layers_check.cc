// The Llama layers' CUDA kernels (RMSNorm, SwiGLU, RoPE with grouped-query
// packing) run on the CPU emulator against double-precision references.
#include <cmath>
#include <cstdio>
#include <vector>
#include "core/kernels/cuda/elementwise.h"
#include "core/kernels/cuda/layernorm.h"
#include "core/kernels/cuda/rope.h"
#include "core/kernels/cuda/emulation/check_util.h"

using namespace weft;
using namespace weft::cuda;

#include "core/kernels/cuda/emulation/simple_check.h"

template <typename T> std::vector<T> ToHost(const std::vector<float>& v) {
  std::vector<T> h(v.size()); for (size_t i = 0; i < v.size(); ++i) h[i] = HostFromF<T>(v[i]); return h;
}
template <typename T> constexpr DType EmuDType() { return sizeof(T) == 2 ? DType::kBF16 : DType::kF32; }
template <typename T> const char* NameOf() { return sizeof(T) == 2 ? "bf16" : "f32"; }

// RMSNorm forward, plain (residual_out must stay untouched) and fused with
// the residual add (residual_out = a + b rounded to T, bit for bit, and
// normalized as stored).
template <typename T>
void RmsNormForwardCase(int rows, int C, bool fused) {
  const size_t n = size_t(rows) * C;
  const std::vector<T> a = ToHost<T>(Rand(n, 41, 3)), b = ToHost<T>(Rand(n, 42, 2)), w = ToHost<T>(Rand(C, 43));
  std::vector<T> res(n, HostFromF<T>(7.0f)), out(n);
  std::vector<float> rstd(rows);
  ok(LaunchRmsNormForward(res.data(), out.data(), rstd.data(), a.data(), fused ? b.data() : nullptr, w.data(),
                          EmuDType<T>(), rows, C, 1e-5f, nullptr));
  std::vector<double> want(n), want_rstd(rows);
  bool res_ok = true;
  for (int r = 0; r < rows; ++r) {
    std::vector<double> x(C);
    for (int i = 0; i < C; ++i) {
      const size_t k = size_t(r) * C + i;
      x[i] = fused ? AsF(HostFromF<T>(AsF(a[k]) + AsF(b[k]))) : AsF(a[k]);
      res_ok = res_ok && AsF(res[k]) == (fused ? float(x[i]) : 7.0f);
    }
    double ms = 0; for (int i = 0; i < C; ++i) ms += x[i] * x[i];
    const double s = 1 / std::sqrt(ms / C + 1e-5);
    want_rstd[r] = s;
    for (int i = 0; i < C; ++i) want[size_t(r) * C + i] = x[i] * s * AsF(w[i]);
  }
  std::vector<float> got(n); for (size_t i = 0; i < n; ++i) got[i] = AsF(out[i]);
  char name[96];
  snprintf(name, sizeof name, "rmsnorm fwd %s %dx%d%s", NameOf<T>(), rows, C, fused ? " +residual" : "");
  Check(name, Err(got, want), sizeof(T) == 2 ? 1e-2 : 1e-5);
  Check("  rstd", Err(rstd, want_rstd), 1e-5);
  if (!res_ok) { printf("  residual_out %s: FAIL\n", fused ? "is not a + b rounded" : "was written"); ++bad; }
}

// RMSNorm backward against a double reference from the same inputs; the
// residual cases as LayerNormBackwardCase's (0 none, 1 dx itself, 2 another
// tensor, 3 another tensor with dx written over dy). dweight starts at 0.25.
template <typename T, typename G>
std::vector<G> RmsNormBackwardCase(int rows, int C, int residual, int offset = 0) {
  const size_t n = size_t(rows) * C;
  std::vector<T> x(n + 1), dy(n + 1), res(n + 1), dx(n + 1), w(C);
  auto fx = Rand(n, 51, 3), fdy = Rand(n, 52), fres = Rand(n, 53), fdx = Rand(n, 54), fw = Rand(C, 55);
  for (size_t i = 0; i < n; ++i) {
    x[i + offset] = HostFromF<T>(fx[i]); dy[i + offset] = HostFromF<T>(fdy[i]);
    res[i + offset] = HostFromF<T>(fres[i]); dx[i + offset] = HostFromF<T>(fdx[i]);
  }
  for (int i = 0; i < C; ++i) w[i] = HostFromF<T>(fw[i]);
  std::vector<float> rf(rows);
  std::vector<double> want_dx(n), want_dw(C, 0.25);
  for (int r = 0; r < rows; ++r) {
    auto X = [&](int i) { return double(AsF(x[offset + size_t(r) * C + i])); };
    auto DY = [&](int i) { return double(AsF(dy[offset + size_t(r) * C + i])); };
    double ms = 0; for (int i = 0; i < C; ++i) ms += X(i) * X(i);
    rf[r] = float(1 / std::sqrt(ms / C + 1e-5));
    const double s = rf[r];
    double s2 = 0;
    for (int i = 0; i < C; ++i) { const double xh = X(i) * s; s2 += DY(i) * AsF(w[i]) * xh; want_dw[i] += DY(i) * xh; }
    s2 /= C;
    for (int i = 0; i < C; ++i) {
      const size_t k = offset + size_t(r) * C + i;
      const double base = residual == 1 ? AsF(dx[k]) : residual >= 2 ? AsF(res[k]) : 0.0;
      want_dx[size_t(r) * C + i] = base + (DY(i) * AsF(w[i]) - X(i) * s * s2) * s;
    }
  }
  const std::vector<T> res_before = res;
  std::vector<G> dw(C, HostFromF<G>(0.25f));
  std::vector<float> scratch(RmsNormBackwardScratchFloats(rows, C));
  const void* rp = residual == 1 ? dx.data() + offset : residual >= 2 ? res.data() + offset : nullptr;
  std::vector<T>& out = residual == 3 ? dy : dx;
  ok(LaunchRmsNormBackward(out.data() + offset, dw.data(), EmuDType<G>(), dy.data() + offset, rp, x.data() + offset,
                           w.data(), rf.data(), EmuDType<T>(), rows, C, scratch.data(), nullptr));
  std::vector<float> got_dx(n), got_dw(C);
  for (size_t i = 0; i < n; ++i) got_dx[i] = AsF(out[i + offset]);
  for (int i = 0; i < C; ++i) got_dw[i] = AsF(dw[i]);
  const char* rn[] = {"none", "dx", "other", "other, dx=dy"};
  char name[120];
  snprintf(name, sizeof name, "rmsnorm bwd %s %dx%d res=%s grads %s%s dx", NameOf<T>(), rows, C, rn[residual], NameOf<G>(),
           offset ? " scalar" : "");
  Check(name, Err(got_dx, want_dx), sizeof(T) == 2 ? 1e-2 : 1e-5);
  snprintf(name + strlen(name) - 2, 40, "dw");
  Check(name, Err(got_dw, want_dw), sizeof(G) == 2 ? 1e-2 : 1e-5);
  if (residual >= 2 && std::memcmp(res.data(), res_before.data(), res.size() * sizeof(T)) != 0) { printf("  residual was modified: FAIL\n"); ++bad; }
  return dw;
}

void RmsNormChecks() {
  for (int C : {64, 100, 768}) {
    for (bool fused : {false, true}) { RmsNormForwardCase<float>(37, C, fused); RmsNormForwardCase<__nv_bfloat16>(37, C, fused); }
    for (int residual : {0, 1, 2, 3}) {
      RmsNormBackwardCase<float, float>(37, C, residual);
      RmsNormBackwardCase<__nv_bfloat16, float>(37, C, residual);
    }
  }
  RmsNormForwardCase<float>(5, 13, true);  // scalar path
  RmsNormBackwardCase<__nv_bfloat16, __nv_bfloat16>(20, 768, 1);
  RmsNormBackwardCase<float, __nv_bfloat16>(9, 100, 0);
  RmsNormBackwardCase<__nv_bfloat16, float>(7, 4096, 2);  // rereads rows; 6 warps a block
  RmsNormBackwardCase<float, float>(8200, 8, 1);          // 24-row chunks
  // Vector and scalar paths sum dweight in the same order.
  const auto vec = RmsNormBackwardCase<float, float>(50, 96, 2);
  const auto sca = RmsNormBackwardCase<float, float>(50, 96, 2, /*offset=*/1);
  printf("%-40s %s\n", "  rmsnorm vector == scalar dw, bitwise", vec == sca ? "ok" : "FAIL");
  bad += vec != sca;
  // Past the widest C the backward refuses instead of overflowing shared memory.
  const int64_t wide = RmsNormBackwardMaxChannels() + 8;
  std::vector<float> z(2 * wide), zw(wide), zr(2, 1.0f);
  const absl::Status st = LaunchRmsNormBackward(z.data(), zw.data(), DType::kF32, z.data(), nullptr, z.data(), zw.data(),
                                                zr.data(), DType::kF32, 2, wide, nullptr, nullptr);
  Check("rmsnorm bwd refused past the widest C", absl::IsInvalidArgument(st) ? 0 : 1, 0);
}

// SwiGLU forward and backward (out of place, then in place over gate_up,
// which must give the same bits) against double.
template <typename T>
void SwiGluCase(int rows, int H) {
  const size_t n = size_t(rows) * H;
  const std::vector<T> gu = ToHost<T>(Rand(2 * n, 61, 5)), dout = ToHost<T>(Rand(n, 62));
  std::vector<T> out(n), dgu(2 * n);
  ok(LaunchSwiGluForward(out.data(), gu.data(), EmuDType<T>(), rows, H, nullptr));
  ok(LaunchSwiGluBackward(dgu.data(), dout.data(), gu.data(), EmuDType<T>(), rows, H, nullptr));
  std::vector<T> in_place = gu;
  ok(LaunchSwiGluBackward(in_place.data(), dout.data(), in_place.data(), EmuDType<T>(), rows, H, nullptr));
  std::vector<double> want(n), want_d(2 * n);
  for (int r = 0; r < rows; ++r) for (int j = 0; j < H; ++j) {
    const double g = AsF(gu[size_t(r) * 2 * H + j]), u = AsF(gu[size_t(r) * 2 * H + H + j]);
    const double d = AsF(dout[size_t(r) * H + j]), s = 1 / (1 + std::exp(-g));
    want[size_t(r) * H + j] = g * s * u;
    want_d[size_t(r) * 2 * H + j] = d * u * s * (1 + g * (1 - s));
    want_d[size_t(r) * 2 * H + H + j] = d * g * s;
  }
  std::vector<float> got(n), got_d(2 * n);
  for (size_t i = 0; i < n; ++i) got[i] = AsF(out[i]);
  for (size_t i = 0; i < 2 * n; ++i) got_d[i] = AsF(dgu[i]);
  char name[80];
  snprintf(name, sizeof name, "swiglu fwd/bwd %s %dx%d", NameOf<T>(), rows, H);
  Check(name, std::max(Err(got, want), Err(got_d, want_d)), sizeof(T) == 2 ? 1e-2 : 1e-5);
  const bool same = std::memcmp(in_place.data(), dgu.data(), dgu.size() * sizeof(T)) == 0;
  printf("%-40s %s\n", "  swiglu bwd in place == out of place", same ? "ok" : "FAIL");
  bad += !same;
}

// RopeQkv forward and backward against double: q (B, T, H*D), k and v
// (B, T, G*D), tokens at `pos`, a table of P = 16 positions. The backward
// is also checked as the forward's transpose: <F(x), y> = <x, F^T(y)>.
template <typename T>
void RopeCase(int H, int G, int D, int B, const TokenChunks& pos) {
  const int T_ = int(pos.size()), P = 16, half = D / 2, C = H * D, KC = G * D, group = H / G;
  std::vector<float> rope(size_t(P) * D);
  for (int p = 0; p < P; ++p) for (int i = 0; i < half; ++i) {
    const double f = std::pow(10000.0, -2.0 * i / D);
    rope[p * D + i] = float(std::cos(p * f)); rope[p * D + half + i] = float(std::sin(p * f));
  }
  const size_t tokens = size_t(B) * T_;
  const std::vector<T> q = ToHost<T>(Rand(tokens * C, 71, 2)), k = ToHost<T>(Rand(tokens * KC, 72, 2)),
                       v = ToHost<T>(Rand(tokens * KC, 73, 2)), dqkv = ToHost<T>(Rand(tokens * 3 * C, 74));
  const RopeDims dims{B, T_, H, G, D};
  std::vector<T> qkv(tokens * 3 * C), dq(tokens * C), dk(tokens * KC), dv(tokens * KC);
  ok(LaunchRopeQkvForward(qkv.data(), q.data(), k.data(), v.data(), rope.data(), pos, EmuDType<T>(), dims, nullptr));
  ok(LaunchRopeQkvBackward(dq.data(), dk.data(), dv.data(), dqkv.data(), rope.data(), pos, EmuDType<T>(), dims, nullptr));
  std::vector<double> want(tokens * 3 * C), want_dq(tokens * C), want_dk(tokens * KC, 0), want_dv(tokens * KC, 0);
  for (size_t tok = 0; tok < tokens; ++tok) {
    const int64_t p = pos.Position(int64_t(tok % T_));
    for (int h = 0; h < H; ++h) for (int i = 0; i < half; ++i) {
      const double c = rope[p * D + i], s = rope[p * D + half + i];
      const size_t qa = tok * C + h * D + i, ka = tok * KC + (h / group) * D + i, o = tok * 3 * C + h * D + i;
      const double q0 = AsF(q[qa]), q1 = AsF(q[qa + half]), k0 = AsF(k[ka]), k1 = AsF(k[ka + half]);
      want[o] = q0 * c - q1 * s; want[o + half] = q1 * c + q0 * s;
      want[o + C] = k0 * c - k1 * s; want[o + C + half] = k1 * c + k0 * s;
      want[o + 2 * C] = AsF(v[ka]); want[o + 2 * C + half] = AsF(v[ka + half]);
      // Transpose: (a0, a1) -> (a0 c + a1 s, a1 c - a0 s), K/V summed over the group.
      auto back = [&](size_t at, double& r0, double& r1) {
        const double a0 = AsF(dqkv[at]), a1 = AsF(dqkv[at + half]);
        r0 = a0 * c + a1 * s; r1 = a1 * c - a0 * s;
      };
      double r0, r1;
      back(o, r0, r1); want_dq[qa] = r0; want_dq[qa + half] = r1;
      back(o + C, r0, r1); want_dk[ka] += r0; want_dk[ka + half] += r1;
      want_dv[ka] += AsF(dqkv[o + 2 * C]); want_dv[ka + half] += AsF(dqkv[o + 2 * C + half]);
    }
  }
  auto floats = [](const std::vector<T>& t) { std::vector<float> f(t.size()); for (size_t i = 0; i < t.size(); ++i) f[i] = AsF(t[i]); return f; };
  const std::vector<float> gqkv = floats(qkv), gdq = floats(dq), gdk = floats(dk), gdv = floats(dv);
  char name[120];
  snprintf(name, sizeof name, "rope qkv %s H=%d G=%d D=%d chunks %dx%d@%d,%d fwd", NameOf<T>(), H, G, D, pos.count,
           int(pos.chunk_len), int(pos.offsets[0]), int(pos.offsets[1]));
  const double tol = sizeof(T) == 2 ? 1e-2 : 1e-5;
  Check(name, Err(gqkv, want), tol);
  snprintf(name + strlen(name) - 3, 40, "bwd");
  Check(name, std::max({Err(gdq, want_dq), Err(gdk, want_dk), Err(gdv, want_dv)}), tol);
  double lhs = 0, rhs = 0, mag = 0;
  for (size_t i = 0; i < gqkv.size(); ++i) { lhs += double(gqkv[i]) * AsF(dqkv[i]); mag += std::fabs(double(gqkv[i]) * AsF(dqkv[i])); }
  for (size_t i = 0; i < gdq.size(); ++i) rhs += double(AsF(q[i])) * gdq[i];
  for (size_t i = 0; i < gdk.size(); ++i) rhs += double(AsF(k[i])) * gdk[i] + double(AsF(v[i])) * gdv[i];
  snprintf(name + strlen(name) - 3, 40, "adjoint");
  Check(name, std::fabs(lhs - rhs) / mag, sizeof(T) == 2 ? 1e-2 : 1e-5);
}

void RopeChecks() {
  TokenChunks two;  // T = 6: positions 0, 1, 2, 9, 10, 11
  two.chunk_len = 3; two.count = 2; two.offsets[0] = 0; two.offsets[1] = 9;
  for (const TokenChunks& pos : {TokenChunks::Contiguous(5, 7), two}) {
    for (auto [H, G] : {std::pair{4, 2}, std::pair{3, 3}}) {
      for (int D : {16, 64}) { RopeCase<float>(H, G, D, 2, pos); RopeCase<__nv_bfloat16>(H, G, D, 2, pos); }
    }
  }
  // D / 2 not a multiple of the vector width: the scalar path.
  RopeCase<float>(4, 2, 12, 2, two); RopeCase<__nv_bfloat16>(6, 2, 12, 2, TokenChunks::Contiguous(5, 7));
  // One K/V head for all query heads (multi-query).
  RopeCase<__nv_bfloat16>(4, 1, 64, 1, two);
}

int main() {
  RmsNormChecks();
  SwiGluCase<float>(7, 37); SwiGluCase<__nv_bfloat16>(7, 37); SwiGluCase<float>(5, 64); SwiGluCase<__nv_bfloat16>(5, 40);
  RopeChecks();
  printf(bad ? "FAILURES: %d\n" : "all ok\n", bad);
  return bad;
}
