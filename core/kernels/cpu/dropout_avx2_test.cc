#include "core/kernels/cpu/dropout_avx2.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "core/kernels/cpu/cpu_ops.h"
#include "core/kernels/philox.h"
#include "core/testing/grad_check.h"

namespace weft::cpu {
namespace {

// Each element against the scalar draw, with 64-bit seed and sample words
// and a run of blocks whose low counter word wraps in the middle of an
// eight-block group (lanes 4..7 carry into the high word).
TEST(DropoutAvx2Test, EveryElementIsTheScalarDrawAcrossTheCounterCarry) {
  if (!HasAvx2()) GTEST_SKIP() << "this CPU has no AVX2";
  const int64_t n = 96;
  const uint64_t first_block = 0xFFFFFFFCull, seed = 0x0123456789ABCDEFull;
  const uint64_t sample = 0xFEDCBA9876543210ull;
  const float p = 0.4f, scale = 1.0f / 0.6f;
  const std::vector<float> in = testing::Values(testing::RandomTensor({n}, 3));
  std::vector<float> out(n, -1.f);
  DropoutBlocksAvx2(out.data(), in.data(), n, first_block, seed, sample, p, scale);
  int kept = 0;
  for (int64_t e = 0; e < n; ++e) {
    const bool keep = DropoutKeepAt(seed, sample, 4 * first_block + e, p);
    ASSERT_EQ(out[e], keep ? in[e] * scale : 0.f) << e;
    kept += keep;
  }
  EXPECT_GT(kept, n / 4);
  EXPECT_LT(kept, n * 7 / 8);
}

// Through the kernel: a launch over one whole-tensor sample starting at an
// offset inside a Philox block, so the cursor runs up to the block
// boundary, the vector kernel the groups of 32, and the cursor the tail.
TEST(DropoutAvx2Test, UnalignedLaunchesMixBothPathsExactly) {
  CpuKernelOps ops;
  const KernelContext ctx{Device::Cpu()};
  for (uint64_t offset : {0, 1, 3, 30, 4097}) {
    const int64_t n = 1000;
    const DropoutKey key{.seed = 77, .offset = offset};
    Tensor x = testing::RandomTensor({n}, 5);
    Tensor out = *Tensor::Empty({n}, DType::kF32);
    ASSERT_TRUE(ops.DropoutForward(ctx, out, x, 0.2f, key).ok());
    const std::vector<float> in = testing::Values(x), got = testing::Values(out);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], DropoutKeep(key, i, 0.2f) ? in[i] * (1.0f / 0.8f) : 0.f)
          << "offset " << offset << " element " << i;
    }
  }
}

}  // namespace
}  // namespace weft::cpu
