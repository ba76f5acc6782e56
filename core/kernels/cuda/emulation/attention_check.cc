// Runs the flash (and simple) attention kernels under CPU emulation and
// compares with a double-precision reference; see run.sh.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#include "core/kernels/cuda/attention_internal.h"
#include "core/tensor/cuda/cuda_check.h"

namespace weft {
absl::Status CudaError(cudaError_t err, const char* expr, const char*, int) {
  return absl::InternalError(std::string(expr) + " " + std::to_string(int(err)));
}
}  // namespace weft

using weft::cuda::AttentionDims;

float RoundBf(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

struct Ref { std::vector<double> out, lse, dqkv; };

Ref Reference(const std::vector<float>& qkv, const std::vector<float>& dout, int B, int T, int NH, int HS) {
  const int C = NH * HS, ld = 3 * C;
  Ref r{std::vector<double>(B * T * C), std::vector<double>(B * NH * T), std::vector<double>(B * T * ld, 0.0)};
  const double scale = 1.0 / std::sqrt(double(HS));
  for (int b = 0; b < B; ++b) for (int h = 0; h < NH; ++h) for (int i = 0; i < T; ++i) {
    const float* q = &qkv[(b * T + i) * ld + h * HS];
    std::vector<double> s(i + 1);
    double mx = -1e300;
    for (int j = 0; j <= i; ++j) {
      const float* k = &qkv[(b * T + j) * ld + C + h * HS];
      double dot = 0; for (int e = 0; e < HS; ++e) dot += double(q[e]) * k[e];
      s[j] = dot * scale; mx = std::max(mx, s[j]);
    }
    double sum = 0; for (int j = 0; j <= i; ++j) sum += std::exp(s[j] - mx);
    const double lse = mx + std::log(sum);
    r.lse[(b * NH + h) * T + i] = lse;
    for (int e = 0; e < HS; ++e) {
      double o = 0;
      for (int j = 0; j <= i; ++j) o += std::exp(s[j] - lse) * qkv[(b * T + j) * ld + 2 * C + h * HS + e];
      r.out[(b * T + i) * C + h * HS + e] = o;
    }
  }
  for (int b = 0; b < B; ++b) for (int h = 0; h < NH; ++h) for (int i = 0; i < T; ++i) {
    const float* q = &qkv[(b * T + i) * ld + h * HS];
    const float* go = &dout[(b * T + i) * C + h * HS];
    double D = 0; for (int e = 0; e < HS; ++e) D += double(go[e]) * r.out[(b * T + i) * C + h * HS + e];
    const double lse = r.lse[(b * NH + h) * T + i];
    for (int j = 0; j <= i; ++j) {
      const float* k = &qkv[(b * T + j) * ld + C + h * HS];
      const float* v = &qkv[(b * T + j) * ld + 2 * C + h * HS];
      double dot = 0, dp = 0;
      for (int e = 0; e < HS; ++e) { dot += double(q[e]) * k[e]; dp += double(go[e]) * v[e]; }
      const double p = std::exp(dot * scale - lse), ds = p * (dp - D) * scale;
      for (int e = 0; e < HS; ++e) {
        r.dqkv[(b * T + i) * ld + h * HS + e] += ds * k[e];
        r.dqkv[(b * T + j) * ld + C + h * HS + e] += ds * q[e];
        r.dqkv[(b * T + j) * ld + 2 * C + h * HS + e] += p * go[e];
      }
    }
  }
  return r;
}

template <typename V>
double MaxErr(const V& got, const std::vector<double>& want, double* scale_out) {
  double scale = 1e-30, err = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < want.size(); ++i) err = std::max(err, std::fabs(double(got[i]) - want[i]));
  *scale_out = scale;
  return err / scale;
}

int Run(int B, int T, int NH, int HS, bool flash) {
  const int C = NH * HS;
  std::mt19937 gen(42);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  std::vector<float> qkv(B * T * 3 * C), dout(B * T * C);
  for (auto& x : qkv) x = RoundBf(u(gen));
  for (auto& x : dout) x = RoundBf(u(gen) / 1.5f);
  Ref ref = Reference(qkv, dout, B, T, NH, HS);
  AttentionDims d{B, T, NH, HS};
  std::vector<float> lse(B * NH * T, 0.f), dsum(B * NH * T, 0.f), outf(B * T * C);
  std::vector<float> dqkvf(qkv.size(), 12345.f);
  absl::Status st;
  if (flash) {
    std::vector<__nv_bfloat16> q16(qkv.size()), do16(dout.size()), o16(B * T * C), dq16(qkv.size(), __float2bfloat16_rn(777.f));
    for (size_t i = 0; i < qkv.size(); ++i) q16[i] = __float2bfloat16_rn(qkv[i]);
    for (size_t i = 0; i < dout.size(); ++i) do16[i] = __float2bfloat16_rn(dout[i]);
    st = weft::cuda::LaunchFlashForward(o16.data(), lse.data(), q16.data(), d, nullptr);
    if (!st.ok()) { printf("fwd: %s\n", std::string(st.message()).c_str()); return 1; }
    for (size_t i = 0; i < o16.size(); ++i) outf[i] = __bfloat162float(o16[i]);
    st = weft::cuda::LaunchAttentionRowDot(dsum.data(), do16.data(), o16.data(), weft::DType::kBF16, d, nullptr);
    st = weft::cuda::LaunchFlashBackward(dq16.data(), do16.data(), q16.data(), lse.data(), dsum.data(), d, nullptr);
    if (!st.ok()) { printf("bwd: %s\n", std::string(st.message()).c_str()); return 1; }
    for (size_t i = 0; i < dq16.size(); ++i) dqkvf[i] = __bfloat162float(dq16[i]);
  } else {
    st = weft::cuda::LaunchSimpleForward(outf.data(), lse.data(), qkv.data(), weft::DType::kF32, d, nullptr);
    st = weft::cuda::LaunchAttentionRowDot(dsum.data(), dout.data(), outf.data(), weft::DType::kF32, d, nullptr);
    st = weft::cuda::LaunchSimpleBackward(dqkvf.data(), dout.data(), qkv.data(), lse.data(), dsum.data(), weft::DType::kF32, d, nullptr);
  }
  double so, sl, sd;
  const double eo = MaxErr(outf, ref.out, &so), el = MaxErr(lse, ref.lse, &sl), ed = MaxErr(dqkvf, ref.dqkv, &sd);
  printf("%s B=%d T=%d NH=%d HS=%d: out %.2e (scale %.2f) lse %.2e dqkv %.2e (scale %.2f)\n",
         flash ? "flash " : "simple", B, T, NH, HS, eo, so, el, ed, sd);
  return (eo < 3e-2 && el < 2e-3 && ed < 3e-2) ? 0 : 1;
}

int main() {
  int bad = 0;
  bad += Run(1, 200, 12, 64, true);
  bad += Run(1, 1, 1, 64, true);
  bad += Run(1, 67, 2, 64, true);
  bad += Run(2, 130, 1, 32, true);
  bad += Run(1, 100, 1, 128, true);
  bad += Run(1, 67, 2, 40, false);
  printf(bad ? "FAILURES: %d\n" : "all ok\n", bad);
  return bad;
}
