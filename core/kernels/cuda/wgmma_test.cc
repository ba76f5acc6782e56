// wgmma.cuh's building blocks on the GPU, in isolation: a 64 x n x k product
// of one warpgroup (A fragments from registers, B through the core-matrix
// layout and its descriptor, the f32 accumulator layout) against a CPU
// product, with B loaded as is (LoadCoreTileAsync) and through
// TransposeToCoreLayout from a row-major tile and from a core-layout tile.
// If the wgmma attention kernels fail on a GPU, this says whether the
// layouts themselves are wrong. Needs compute capability 9.0 (skipped
// elsewhere).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/kernels/cuda/wgmma_probe.h"
#include "gtest/gtest.h"

namespace weft::cuda {
namespace {

bool IsSm90() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  return major == 9 && minor == 0;
}

template <typename T>
T* DeviceCopy(const std::vector<T>& host) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return static_cast<T*>(p);
}

// Entries are small integers, so every product and sum is exact in f32 and
// the result must match the CPU exactly: any misplaced element shows.
void CheckProduct(int n, int k, WgmmaProbeB how) {
  const bool transposed = how != WgmmaProbeB::kKMajor;
  SCOPED_TRACE(::testing::Message() << "n=" << n << " k=" << k
                                    << " how=" << static_cast<int>(how));
  std::mt19937 gen(n * 131 + k + static_cast<int>(how));
  std::uniform_int_distribution<int> u(-4, 4);
  std::vector<float> a(64 * k), b(k * n);  // b: k x n, B itself
  for (float& x : a) x = static_cast<float>(u(gen));
  for (float& x : b) x = static_cast<float>(u(gen));
  std::vector<__nv_bfloat16> a16(a.size()), b16(b.size());
  for (size_t i = 0; i < a.size(); ++i) a16[i] = __float2bfloat16(a[i]);
  for (int r = 0; r < k; ++r) {
    for (int c = 0; c < n; ++c) {
      // As is: the n x k transpose (B's columns contiguous); else k x n.
      b16[transposed ? r * n + c : c * k + r] = __float2bfloat16(b[r * n + c]);
    }
  }
  __nv_bfloat16* da = DeviceCopy(a16);
  __nv_bfloat16* db = DeviceCopy(b16);
  float* dd = DeviceCopy(std::vector<float>(64 * n, NAN));
  absl::Status st = LaunchWgmmaProbe(dd, da, db, n, k, how, nullptr);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> got(64 * n);
  ASSERT_EQ(cudaMemcpy(got.data(), dd, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  int wrong = 0;
  for (int r = 0; r < 64; ++r) {
    for (int c = 0; c < n; ++c) {
      float want = 0;
      for (int i = 0; i < k; ++i) want += a[r * k + i] * b[i * n + c];
      if (got[r * n + c] != want && ++wrong <= 5) {
        ADD_FAILURE() << "d[" << r << "][" << c << "] = " << got[r * n + c] << ", want " << want;
      }
    }
  }
  EXPECT_EQ(wrong, 0) << "elements wrong of " << 64 * n;
  cudaFree(da);
  cudaFree(db);
  cudaFree(dd);
}

TEST(WgmmaTest, ProductsThroughTheCoreMatrixLayout) {
  if (!IsSm90()) GTEST_SKIP() << "wgmma needs compute capability 9.0";
  for (WgmmaProbeB how : {WgmmaProbeB::kKMajor, WgmmaProbeB::kTransposed,
                          WgmmaProbeB::kTransposedFromCore}) {
    CheckProduct(32, 16, how);
    CheckProduct(64, 16, how);
    CheckProduct(128, 16, how);
    CheckProduct(64, 64, how);  // four k-steps: the descriptor's start advances
  }
}

// B read N-major through the instruction's transpose bit, straight from a
// K x N core tile (CoreLayoutDescriptorNMajor): not used by the attention
// kernels yet; if this passes on a GPU, their V^T, Q^T, dO^T and K^T
// transposes can go.
TEST(WgmmaTest, NMajorBWithTheTransposeBit) {
  if (!IsSm90()) GTEST_SKIP() << "wgmma needs compute capability 9.0";
  CheckProduct(32, 16, WgmmaProbeB::kNMajor);
  CheckProduct(64, 16, WgmmaProbeB::kNMajor);
  CheckProduct(128, 16, WgmmaProbeB::kNMajor);
  CheckProduct(64, 64, WgmmaProbeB::kNMajor);
}

}  // namespace
}  // namespace weft::cuda
