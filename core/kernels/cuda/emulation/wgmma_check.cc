// Runs wgmma_probe.cu (wgmma.cuh's building blocks: one warpgroup's
// product with B in the core-matrix layout, loaded as is, transposed from a
// row-major or a core tile, or read N-major with the transpose bit) under
// CPU emulation against an exact product of small integers; see run.sh.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "core/kernels/cuda/emulation/check_util.h"
#include "core/kernels/cuda/wgmma_probe.h"

using weft::cuda::WgmmaProbeB;

int Check(int n, int k, WgmmaProbeB how) {
  std::mt19937 gen(n * 7 + k + static_cast<int>(how));
  std::uniform_int_distribution<int> u(-4, 4);
  std::vector<float> a(64 * k), b(k * n);
  for (float& x : a) x = static_cast<float>(u(gen));
  for (float& x : b) x = static_cast<float>(u(gen));
  std::vector<__nv_bfloat16> a16(a.size()), b16(b.size());
  for (size_t i = 0; i < a.size(); ++i) a16[i] = __float2bfloat16_rn(a[i]);
  const bool k_major = how == WgmmaProbeB::kKMajor;
  for (int r = 0; r < k; ++r) {
    for (int c = 0; c < n; ++c) {
      b16[k_major ? c * k + r : r * n + c] = __float2bfloat16_rn(b[r * n + c]);
    }
  }
  std::vector<float> d(64 * n, NAN);
  const absl::Status st =
      weft::cuda::LaunchWgmmaProbe(d.data(), a16.data(), b16.data(), n, k, how, nullptr);
  if (!st.ok()) {
    printf("wgmma probe n=%d k=%d how=%d: %s FAIL\n", n, k, static_cast<int>(how),
           std::string(st.message()).c_str());
    return 1;
  }
  int wrong = 0;
  for (int r = 0; r < 64; ++r) {
    for (int c = 0; c < n; ++c) {
      float want = 0;
      for (int i = 0; i < k; ++i) want += a[r * k + i] * b[i * n + c];
      wrong += d[r * n + c] != want;
    }
  }
  printf("wgmma probe n=%3d k=%2d how=%d: %d of %d wrong %s\n", n, k, static_cast<int>(how), wrong,
         64 * n, wrong ? "FAIL" : "ok");
  return wrong ? 1 : 0;
}

int main() {
  int bad = 0;
  for (WgmmaProbeB how : {WgmmaProbeB::kKMajor, WgmmaProbeB::kTransposed,
                          WgmmaProbeB::kTransposedFromCore, WgmmaProbeB::kNMajor}) {
    bad += Check(32, 16, how);
    bad += Check(64, 16, how);
    bad += Check(128, 16, how);
    bad += Check(64, 64, how);
  }
  printf(bad ? "FAILURES: %d\n" : "all ok\n", bad);
  return bad;
}
