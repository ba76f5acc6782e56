// Runs the flash (and simple) attention kernels under CPU emulation and
// compares with a double-precision reference; see run.sh.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <cstdio>
#include <random>
#include <string>
#include <vector>
#include "core/kernels/cuda/attention_internal.h"
#include "core/kernels/cuda/emulation/check_util.h"

using weft::cuda::AttentionDims;
using weft::cuda::FlashTiling;

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

// max |got - want| / max |want|: one scale per tensor, so a wrong fragment
// (an O(1) error somewhere) cannot hide behind small entries.
template <typename V>
double MaxErr(const V& got, const std::vector<double>& want) {
  double scale = 1e-30, err = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < want.size(); ++i) err = std::max(err, std::fabs(double(got[i]) - want[i]));
  return err / scale;
}

// Columns [part * C, part * C + C) of a (rows, 3C) matrix: dq, dk or dv.
template <typename V>
std::vector<typename V::value_type> Part(const V& x, int rows, int C, int part) {
  std::vector<typename V::value_type> r;
  for (int i = 0; i < rows; ++i)
    r.insert(r.end(), x.begin() + i * 3 * C + part * C, x.begin() + i * 3 * C + part * C + C);
  return r;
}

// Tolerances (error relative to the tensor's largest reference value). The
// flash kernels read bf16 q, k, v, dout, round P and dS to bf16 before the
// second product and write bf16 outputs, so each output carries a few bf16
// roundings (up to 2^-8 relative each): 1e-2, as in the gpu parity tests; the
// measured errors are about 3e-3. lse stays f32 from f32 accumulations of
// exact bf16 products: 1e-5. The f32 simple kernels: 1e-5 everywhere.
struct Errors { double out, lse, dq, dk, dv; };

// The flash kernels' forward and backward tilings (attention_internal.h).
struct Tilings { FlashTiling fwd, bwd; };
constexpr Tilings kDefault{weft::cuda::kFlashTiling4x16, weft::cuda::kFlashTiling4x16};

Errors Check(int B, int T, int NH, int HS, bool flash, Tilings tilings = kDefault,
             std::vector<float>* raw = nullptr) {
  const int C = NH * HS;
  std::mt19937 gen(42 + T + HS);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  std::vector<float> qkv(B * T * 3 * C), dout(B * T * C);
  for (auto& x : qkv) x = RoundBf(u(gen));
  for (auto& x : dout) x = RoundBf(u(gen) / 1.5f);
  Ref ref = Reference(qkv, dout, B, T, NH, HS);
  AttentionDims d{B, T, NH, HS};
  // Outputs start as 777 so an element a kernel never writes shows up.
  std::vector<float> lse(B * NH * T, 777.f), dsum(B * NH * T, 0.f), outf(B * T * C, 777.f);
  std::vector<float> dqkvf(qkv.size(), 777.f);
  absl::Status st;
  auto ok = [](const absl::Status& s, const char* what) {
    if (!s.ok()) { printf("%s: %s\n", what, std::string(s.message()).c_str()); std::exit(1); }
  };
  if (flash) {
    const __nv_bfloat16 junk = __float2bfloat16_rn(777.f);
    std::vector<__nv_bfloat16> q16(qkv.size()), do16(dout.size()), o16(B * T * C, junk), dq16(qkv.size(), junk);
    for (size_t i = 0; i < qkv.size(); ++i) q16[i] = __float2bfloat16_rn(qkv[i]);
    for (size_t i = 0; i < dout.size(); ++i) do16[i] = __float2bfloat16_rn(dout[i]);
    ok(weft::cuda::LaunchFlashForward(o16.data(), lse.data(), q16.data(), d, tilings.fwd, nullptr), "fwd");
    for (size_t i = 0; i < o16.size(); ++i) outf[i] = __bfloat162float(o16[i]);
    ok(weft::cuda::LaunchAttentionRowDot(dsum.data(), do16.data(), o16.data(), weft::DType::kBF16, d, nullptr), "rowdot");
    // The fused-dq accumulator starts as NaN: a tile added before it was stored shows.
    std::vector<float> workspace(weft::cuda::FlashBackwardWorkspaceFloats(d, tilings.bwd) + 1,
                                 std::numeric_limits<float>::quiet_NaN());
    ok(weft::cuda::LaunchFlashBackward(dq16.data(), do16.data(), q16.data(), lse.data(), dsum.data(), workspace.data(), d, tilings.bwd, nullptr), "bwd");
    for (size_t i = 0; i < dq16.size(); ++i) dqkvf[i] = __bfloat162float(dq16[i]);
  } else {
    ok(weft::cuda::LaunchSimpleForward(outf.data(), lse.data(), qkv.data(), weft::DType::kF32, d, nullptr), "fwd");
    ok(weft::cuda::LaunchAttentionRowDot(dsum.data(), dout.data(), outf.data(), weft::DType::kF32, d, nullptr), "rowdot");
    ok(weft::cuda::LaunchSimpleBackward(dqkvf.data(), dout.data(), qkv.data(), lse.data(), dsum.data(), weft::DType::kF32, d, nullptr), "bwd");
  }
  if (raw != nullptr) {
    *raw = outf;
    raw->insert(raw->end(), lse.begin(), lse.end());
    raw->insert(raw->end(), dqkvf.begin(), dqkvf.end());
  }
  const int rows = B * T;
  return {MaxErr(outf, ref.out), MaxErr(lse, ref.lse), MaxErr(Part(dqkvf, rows, C, 0), Part(ref.dqkv, rows, C, 0)),
          MaxErr(Part(dqkvf, rows, C, 1), Part(ref.dqkv, rows, C, 1)),
          MaxErr(Part(dqkvf, rows, C, 2), Part(ref.dqkv, rows, C, 2))};
}

int Run(int B, int T, int NH, int HS, bool flash, Tilings tilings = kDefault) {
  const Errors e = Check(B, T, NH, HS, flash, tilings);
  const double tol = flash ? 1e-2 : 1e-5, tol_lse = 1e-5;
  const bool good = e.out < tol && e.lse < tol_lse && e.dq < tol && e.dk < tol && e.dv < tol;
  printf("%s B=%d T=%3d NH=%d HS=%3d fwd %s bwd %s: out %.2e lse %.2e dq %.2e dk %.2e dv %.2e %s\n",
         flash ? "flash " : "simple", B, T, NH, HS, weft::cuda::FlashTilingName(tilings.fwd).c_str(),
         weft::cuda::FlashTilingName(tilings.bwd).c_str(), e.out, e.lse, e.dq, e.dk, e.dv,
         good ? "ok" : "FAIL");
  return good ? 0 : 1;
}

// Runs the flash kernels with an emulator switch off, then on, and expects
// the same bits: `what` names the comparison in the line printed.
int RunWithSwitch(int B, int T, int NH, int HS, Tilings tilings, bool& flag, const char* what) {
  std::vector<float> off, on;
  flag = false;
  Check(B, T, NH, HS, true, tilings, &off);
  flag = true;
  Check(B, T, NH, HS, true, tilings, &on);
  flag = false;
  size_t diff = 0;
  for (size_t i = 0; i < off.size(); ++i) diff += std::memcmp(&off[i], &on[i], 4) != 0;
  printf("flash  B=%d T=%3d NH=%d HS=%3d fwd %s bwd %s: %s: %zu of %zu values differ %s\n", B, T,
         NH, HS, weft::cuda::FlashTilingName(tilings.fwd).c_str(),
         weft::cuda::FlashTilingName(tilings.bwd).c_str(), what, diff, off.size(),
         diff ? "FAIL" : "ok");
  return diff ? 1 : 0;
}

// cp.async landing at the wait that covers it (the latest the hardware may)
// must give bitwise the results of landing at once (the earliest): a
// difference is a read the waits do not cover, or a copy overwriting a
// stage other warps still read.
int RunLate(int B, int T, int NH, int HS, Tilings tilings = kDefault) {
  return RunWithSwitch(B, T, NH, HS, tilings, emu::g_late_copies, "cp.async late == at once");
}

// Blocks in reverse order (the last block first) must give the same bits:
// fused-dq's blocks take their keys from tickets and wait on semaphores, so
// a kernel that used blockIdx there would wait on a block not yet run and
// trap (the emulator runs one block at a time).
int RunReversed(int B, int T, int NH, int HS, Tilings tilings) {
  return RunWithSwitch(B, T, NH, HS, tilings, emu::g_reverse_blocks,
                       "blocks reversed == in order");
}

// fused-dq changes dQ's summation only: the forward, lse, dK and dV equal
// the default tiling's bit for bit.
int RunSameDkDv(int B, int T, int NH, int HS, Tilings tilings) {
  std::vector<float> base, other;
  Check(B, T, NH, HS, true, kDefault, &base);
  Check(B, T, NH, HS, true, tilings, &other);
  const size_t C = NH * HS, head = B * T * C + B * NH * T;  // out and lse, then dqkv rows
  size_t diff = 0, compared = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    if (i >= head && (i - head) % (3 * C) < C) continue;  // a dQ element
    diff += std::memcmp(&base[i], &other[i], 4) != 0;
    ++compared;
  }
  printf("flash  B=%d T=%3d NH=%d HS=%3d bwd %s: out, lse, dK, dV == 4x16: %zu of %zu differ %s\n",
         B, T, NH, HS, weft::cuda::FlashTilingName(tilings.bwd).c_str(), diff, compared,
         diff ? "FAIL" : "ok");
  return diff ? 1 : 0;
}

// Every tiling runs each row's products and softmax in the same order, so
// its outputs equal the default tiling's bit for bit (under the emulator,
// whose wgmma sums each 16-wide k-step like its mma.sync; on a GPU the
// compiler and the tensor cores may order the sums differently).
int RunSame(int B, int T, int NH, int HS, Tilings tilings) {
  std::vector<float> base, other;
  Check(B, T, NH, HS, true, kDefault, &base);
  Check(B, T, NH, HS, true, tilings, &other);
  size_t diff = 0;
  for (size_t i = 0; i < base.size(); ++i) diff += std::memcmp(&base[i], &other[i], 4) != 0;
  printf("flash  B=%d T=%3d NH=%d HS=%3d fwd %s bwd %s == 4x16: %zu of %zu values differ %s\n", B,
         T, NH, HS, weft::cuda::FlashTilingName(tilings.fwd).c_str(),
         weft::cuda::FlashTilingName(tilings.bwd).c_str(), diff, base.size(), diff ? "FAIL" : "ok");
  return diff ? 1 : 0;
}

// The tiling the dispatch picks (attention_simple.cu) on the emulated
// device (compute capability 9.0): names from the environment, refusals,
// and the Hopper defaults only where the head size allows them.
int CheckTilingSelection() {
  using namespace weft::cuda;
  int bad = 0;
  auto expect = [&](bool ok, const char* what) {
    printf("tiling selection: %-58s %s\n", what, ok ? "ok" : "FAIL");
    bad += ok ? 0 : 1;
  };
  unsetenv("WEFT_FLASH_FWD_TILING");
  unsetenv("WEFT_FLASH_BWD_TILING");
  auto fwd = FlashForwardTiling(64);
  auto bwd = FlashBackwardTiling(128);
  expect(fwd.ok() && *fwd == kHopperForwardDefault && bwd.ok(), "unset: the defaults");
  setenv("WEFT_FLASH_FWD_TILING", "wgmma-128-nmajor-pipe-k128", 1);
  fwd = FlashForwardTiling(64);
  expect(fwd.ok() && *fwd == kFlashTilingWgmma128NMajorPipeK128, "forward wgmma-128-nmajor-pipe-k128");
  setenv("WEFT_FLASH_FWD_TILING", "16x8", 1);
  expect(!FlashForwardTiling(64).ok(), "forward 16x8 is an error");
  setenv("WEFT_FLASH_BWD_TILING", "wgmma-64-nmajor-pipe", 1);
  bwd = FlashBackwardTiling(64);
  expect(bwd.ok() && *bwd == kFlashTilingWgmma64NMajorPipe, "backward wgmma-64-nmajor-pipe");
  setenv("WEFT_FLASH_BWD_TILING", "wgmma-64-pipe-k128", 1);
  expect(!FlashBackwardTiling(64).ok(), "backward -k128 is an error (a forward tiling)");
  unsetenv("WEFT_FLASH_FWD_TILING");
  unsetenv("WEFT_FLASH_BWD_TILING");
  auto pick = [](FlashTiling t, bool backward, int hs) {
    auto r = FlashDefaultTiling(t, backward, hs);
    return r.ok() ? *r : FlashTiling{0, 0};
  };
  expect(pick(kFlashTilingWgmma64Pipe, true, 64) == kFlashTilingWgmma64Pipe,
         "default wgmma backward at head size 64");
  expect(pick(kFlashTilingWgmma64Pipe, true, 128) == kFlashTiling4x16,
         "default wgmma backward at head size 128: 4x16");
  expect(pick(kFlashTilingWgmma128Pipe, false, 128) == kFlashTilingWgmma128Pipe,
         "default wgmma forward at head size 128");
  expect(pick(kFlashTilingWgmma64PipeK128, false, 128) == kFlashTiling4x16,
         "default 128-key forward at head size 128: 4x16");
  expect(pick(kFlashTiling4x32, false, 128) == kFlashTiling4x16,
         "default 4x32 forward at head size 128: 4x16");
  expect(pick(kFlashTiling8x16, true, 128) == kFlashTiling8x16, "default 8x16 at head size 128");
  expect(FlashTilingName(kFlashTilingWgmma64NMajorPipeK128) == "wgmma-64-nmajor-pipe-k128",
         "the -k128 name");
  setenv("WEFT_FLASH_BWD_TILING", "fused-dq", 1);
  bwd = FlashBackwardTiling(64);
  expect(bwd.ok() && *bwd == kFlashTilingFusedDq, "backward fused-dq");
  setenv("WEFT_FLASH_FWD_TILING", "fused-dq", 1);
  expect(!FlashForwardTiling(64).ok(), "forward fused-dq is an error (a backward tiling)");
  unsetenv("WEFT_FLASH_FWD_TILING");
  unsetenv("WEFT_FLASH_BWD_TILING");
  expect(pick(kFlashTilingFusedDq, true, 128) == kFlashTiling4x16,
         "default fused-dq at head size 128: 4x16");
  expect(pick(kFlashTilingFusedDq, true, 64) == kFlashTilingFusedDq, "default fused-dq at 64");
  {
    const AttentionDims d{1, 64, 1, 128};
    std::vector<__nv_bfloat16> x(64 * 3 * 128), dy(64 * 128);
    std::vector<float> l(64), ds(64), ws(FlashBackwardWorkspaceFloats(d, kFlashTilingFusedDq));
    expect(!LaunchFlashBackward(x.data(), dy.data(), x.data(), l.data(), ds.data(), ws.data(), d,
                                kFlashTilingFusedDq, nullptr)
                .ok(),
           "fused-dq at head size 128 is an error");
    expect(!LaunchFlashBackward(x.data(), dy.data(), x.data(), l.data(), ds.data(), nullptr,
                                {1, 64, 1, 64}, kFlashTilingFusedDq, nullptr)
                .ok(),
           "fused-dq without a workspace is an error");
    expect(FlashBackwardWorkspaceFloats(d, kFlashTiling8x16) == 0, "8x16 needs no workspace");
  }
  return bad;
}

int main() {
  int bad = CheckTilingSelection();
  // T = 80 and 130 end in a partial tile (64 rows per tile); B * NH = 2
  // covers the (batch, head) offsets; T = 1 and 64 are the edges.
  for (int hs : {32, 64, 128}) {
    bad += Run(2, 130, 1, hs, true);
    bad += Run(1, 80, 2, hs, true);
  }
  bad += Run(1, 1, 1, 64, true);
  bad += Run(1, 64, 1, 32, true);
  bad += RunLate(1, 130, 1, 64);
  // 128-row blocks: T = 80 leaves warps with no live row, 200 a second block
  // of 72 rows (a key tile past half its warps), 256 whole blocks.
  const Tilings wide{weft::cuda::kFlashTiling8x16, weft::cuda::kFlashTiling8x16};
  const Tilings two_tiles{weft::cuda::kFlashTiling4x32, weft::cuda::kFlashTiling4x16};
  for (int hs : {32, 64, 128}) bad += Run(1, 200, 1, hs, true, wide);
  bad += Run(1, 80, 2, 64, true, wide);
  bad += Run(1, 256, 1, 64, true, wide);
  for (int hs : {32, 64}) bad += Run(1, 200, 1, hs, true, two_tiles);
  bad += Run(1, 80, 2, 32, true, two_tiles);
  bad += RunLate(1, 200, 1, 64, wide);
  bad += RunLate(1, 130, 1, 64, two_tiles);
  bad += RunSame(1, 200, 2, 64, wide);
  bad += RunSame(1, 200, 2, 64, two_tiles);
  // The wgmma forward (one or two warpgroups of 64 rows), with the default
  // backward on its output.
  const Tilings wg64{weft::cuda::kFlashTilingWgmma64, weft::cuda::kFlashTiling4x16};
  const Tilings wg128{weft::cuda::kFlashTilingWgmma128, weft::cuda::kFlashTiling4x16};
  for (int hs : {32, 64, 128}) {
    bad += Run(2, 130, 1, hs, true, wg64);
    bad += Run(1, 200, 1, hs, true, wg128);
  }
  bad += Run(1, 80, 2, 64, true, wg128);
  bad += Run(1, 1, 1, 64, true, wg64);
  bad += RunLate(1, 200, 1, 64, wg128);
  bad += RunSame(1, 200, 2, 64, wg128);
  // Forward and backward on wgmma (the backward at head sizes 32 and 64).
  const Tilings all_wg64{weft::cuda::kFlashTilingWgmma64, weft::cuda::kFlashTilingWgmma64};
  const Tilings all_wg128{weft::cuda::kFlashTilingWgmma128, weft::cuda::kFlashTilingWgmma128};
  for (int hs : {32, 64}) {
    bad += Run(2, 130, 1, hs, true, all_wg64);
    bad += Run(1, 200, 1, hs, true, all_wg128);
  }
  bad += Run(1, 80, 2, 64, true, all_wg128);
  bad += Run(1, 1, 1, 64, true, all_wg64);
  bad += RunLate(1, 200, 1, 64, all_wg128);
  bad += RunLate(1, 130, 1, 32, all_wg64);
  bad += RunSame(1, 200, 2, 64, all_wg128);
  bad += RunSame(2, 130, 1, 32, all_wg64);
  // ... with B read N-major through the transpose bit (no transposes).
  const Tilings nm64{weft::cuda::kFlashTilingWgmma64NMajor, weft::cuda::kFlashTilingWgmma64NMajor};
  const Tilings nm128{weft::cuda::kFlashTilingWgmma128NMajor,
                      weft::cuda::kFlashTilingWgmma128NMajor};
  bad += Run(2, 130, 1, 32, true, nm64);
  bad += Run(1, 200, 1, 64, true, nm128);
  bad += Run(1, 80, 2, 64, true, nm64);
  bad += Run(1, 100, 1, 128, true, {weft::cuda::kFlashTilingWgmma128NMajor,
                                    weft::cuda::kFlashTiling4x16});
  bad += RunLate(1, 200, 1, 64, nm128);
  bad += RunSame(1, 200, 2, 64, nm128);
  bad += RunSame(2, 130, 1, 32, nm64);
  // The pipelined tilings (each tile's products behind the softmax or the
  // gradients of the next): the same bits, forward and backward.
  for (weft::cuda::FlashTiling pipe :
       {weft::cuda::kFlashTilingWgmma64Pipe, weft::cuda::kFlashTilingWgmma128Pipe,
        weft::cuda::kFlashTilingWgmma64NMajorPipe, weft::cuda::kFlashTilingWgmma128NMajorPipe}) {
    bad += RunSame(1, 200, 2, 64, {pipe, pipe});
  }
  const Tilings pipe64{weft::cuda::kFlashTilingWgmma64Pipe, weft::cuda::kFlashTilingWgmma64Pipe};
  const Tilings pipe128nm{weft::cuda::kFlashTilingWgmma128NMajorPipe,
                          weft::cuda::kFlashTilingWgmma128NMajorPipe};
  bad += Run(2, 130, 1, 32, true, pipe64);
  bad += Run(1, 80, 2, 64, true, pipe128nm);
  bad += Run(1, 1, 1, 64, true, pipe64);
  bad += Run(1, 64, 1, 32, true, pipe128nm);
  bad += RunSame(2, 130, 1, 32, {weft::cuda::kFlashTilingWgmma128Pipe,
                                 weft::cuda::kFlashTilingWgmma128Pipe});
  bad += Run(1, 200, 1, 128, true, {weft::cuda::kFlashTilingWgmma128Pipe,
                                    weft::cuda::kFlashTiling4x16});
  bad += Run(2, 130, 1, 128, true, {weft::cuda::kFlashTilingWgmma64NMajorPipe,
                                    weft::cuda::kFlashTiling4x16});
  bad += RunLate(1, 200, 1, 64, pipe128nm);
  bad += RunLate(1, 130, 1, 64, {weft::cuda::kFlashTilingWgmma128Pipe,
                                 weft::cuda::kFlashTilingWgmma128Pipe});
  // 128-key tiles (pipelined forward, head sizes 32 and 64): other
  // rounding than 64-key tiles (the softmax rescales every 128 keys), so
  // against the references only. T = 200: a partial last tile; 130 and 80:
  // a block whose rows end inside a key tile; T = 1.
  for (weft::cuda::FlashTiling wide :
       {weft::cuda::kFlashTilingWgmma64PipeK128, weft::cuda::kFlashTilingWgmma128PipeK128,
        weft::cuda::kFlashTilingWgmma64NMajorPipeK128,
        weft::cuda::kFlashTilingWgmma128NMajorPipeK128}) {
    bad += Run(1, 200, 1, 64, true, {wide, weft::cuda::kFlashTiling4x16});
  }
  bad += Run(2, 130, 1, 32, true, {weft::cuda::kFlashTilingWgmma64PipeK128, pipe64.bwd});
  bad += Run(1, 80, 2, 64, true, {weft::cuda::kFlashTilingWgmma128NMajorPipeK128, pipe128nm.bwd});
  bad += Run(1, 1, 1, 64, true, {weft::cuda::kFlashTilingWgmma64NMajorPipeK128,
                                 weft::cuda::kFlashTiling4x16});
  bad += RunLate(1, 200, 1, 64, {weft::cuda::kFlashTilingWgmma128PipeK128,
                                 weft::cuda::kFlashTiling4x16});
  // dQ inside the dK/dV kernel (fused-dq; head sizes 32 and 64): dQ sums
  // the key tiles' products in f32 rather than in the mma accumulators, so
  // against the references; dK and dV are the 4x16 kernel's bits. T = 130
  // and 200: partial last tiles and three or four key tiles adding into one
  // query tile; B * NH = 2 and 4: the semaphores and accumulators of other
  // heads; T = 1 and 64: one tile, dQ written directly.
  const Tilings fused{weft::cuda::kFlashTiling4x16, weft::cuda::kFlashTilingFusedDq};
  for (int hs : {32, 64}) {
    bad += Run(2, 130, 1, hs, true, fused);
    bad += Run(1, 200, 2, hs, true, fused);
  }
  bad += Run(2, 80, 2, 64, true, fused);
  bad += Run(1, 1, 1, 64, true, fused);
  bad += Run(1, 64, 1, 32, true, fused);
  bad += RunLate(1, 200, 1, 64, fused);
  bad += RunSameDkDv(2, 200, 1, 64, fused);
  bad += RunReversed(2, 200, 2, 64, fused);
  bad += RunReversed(1, 130, 1, 32, fused);
  bad += Run(1, 67, 2, 40, false);
  printf(bad ? "FAILURES: %d\n" : "all ok\n", bad);
  return bad;
}
