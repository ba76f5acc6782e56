// CPU-vs-CUDA parity for GELU, Add, Scale, Dropout, Sum and SumSquares, and
// ZeroTensors.
// Lengths cover the 16-byte vector path (multiples of 8) and the scalar one,
// and misaligned views. Tolerances: f32 1e-5 (1e-4 for sums), bf16 1e-2.
// Dropout masks must equal the CPU's exactly (same Philox stream).
#include <algorithm>
#include <cmath>

#include "core/kernels/cuda/parity_util.h"
#include "gtest/gtest.h"

namespace weft::cuda::testing {
namespace {

const int64_t kLengths[] = {1, 7, 64, 1000, 4099, 1 << 20};

TEST(GeluParityTest, ForwardAndBackward) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (int64_t n : kLengths) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " n=" << n);
      const auto x = RoundTo(dt, Random(n, 1, 4.0f));
      const auto dy = RoundTo(dt, Random(n, 2));
      Tensor cy = Host(std::vector<float>(n), {n}), cdx = Host(std::vector<float>(n), {n});
      ASSERT_TRUE(CpuOps().GeluForward(kCpuCtx, cy, Host(x, {n})).ok());
      ASSERT_TRUE(CpuOps().GeluBackward(kCpuCtx, cdx, Host(dy, {n}), Host(x, {n})).ok());
      Tensor gx = Gpu(x, {n}, dt), gy = GpuZeros({n}, dt), gdx = GpuZeros({n}, dt);
      ASSERT_TRUE(GpuOps().GeluForward(GpuCtx(), gy, gx).ok());
      ASSERT_TRUE(GpuOps().GeluBackward(GpuCtx(), gdx, Gpu(dy, {n}, dt), gx).ok());
      EXPECT_TRUE(Close(Floats(gy), Floats(cy), TolFor(dt, false)));
      EXPECT_TRUE(Close(Floats(gdx), Floats(cdx), TolFor(dt, false)));
    }
  }
}

TEST(GeluParityTest, InPlaceOnAMisalignedView) {
  const int64_t n = 1001;
  const auto x = Random(n + 1, 1, 3.0f);
  Tensor base = Gpu(x, {n + 1}, DType::kF32);
  Tensor view = base.Slice(0, 1, n + 1);  // 4-byte offset: scalar path
  ASSERT_TRUE(GpuOps().GeluForward(GpuCtx(), view, view).ok());
  Tensor cy = Host(std::vector<float>(n), {n});
  ASSERT_TRUE(
      CpuOps().GeluForward(kCpuCtx, cy, Host(std::vector<float>(x.begin() + 1, x.end()), {n}))
          .ok());
  EXPECT_TRUE(Close(Floats(view), Floats(cy), kF32Tol));
  EXPECT_EQ(Floats(base)[0], x[0]);
}

TEST(AddParityTest, SameAndMixedDTypes) {
  for (int64_t n : kLengths) {
    for (DType out_dt : {DType::kF32, DType::kBF16}) {
      for (DType a_dt : {DType::kF32, DType::kBF16}) {
        for (DType b_dt : {DType::kF32, DType::kBF16}) {
          const auto a = RoundTo(a_dt, Random(n, 1)), b = RoundTo(b_dt, Random(n, 2));
          Tensor c = Host(std::vector<float>(n), {n});
          ASSERT_TRUE(CpuOps().Add(kCpuCtx, c, Host(a, {n}), Host(b, {n})).ok());
          Tensor out = GpuZeros({n}, out_dt);
          ASSERT_TRUE(GpuOps().Add(GpuCtx(), out, Gpu(a, {n}, a_dt), Gpu(b, {n}, b_dt)).ok());
          EXPECT_TRUE(Close(Floats(out), Floats(c), TolFor(out_dt, false))) << n;
        }
      }
    }
  }
}

TEST(AddParityTest, OutputMayAliasAnInput) {
  const int64_t n = 4096;
  const auto a = Random(n, 1), b = Random(n, 2);
  Tensor ga = Gpu(a, {n}, DType::kF32);
  ASSERT_TRUE(GpuOps().Add(GpuCtx(), ga, ga, Gpu(b, {n}, DType::kF32)).ok());
  const auto got = Floats(ga);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], a[i] + b[i]) << i;
}

TEST(ScaleParityTest, F32AndBf16) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (int64_t n : kLengths) {
      const auto x = RoundTo(dt, Random(n, 3));
      Tensor c = Host(x, {n});
      ASSERT_TRUE(CpuOps().Scale(kCpuCtx, c, 0.37f).ok());
      Tensor g = Gpu(x, {n}, dt);
      ASSERT_TRUE(GpuOps().Scale(GpuCtx(), g, 0.37f).ok());
      EXPECT_TRUE(Close(Floats(g), Floats(c), TolFor(dt, false)));
    }
  }
}

TEST(DropoutParityTest, MaskMatchesCpuBitForBit) {
  for (float p : {0.0f, 0.1f, 0.5f, 0.9f}) {
    for (uint64_t offset : {uint64_t{0}, uint64_t{3}, uint64_t{1} << 33}) {
      for (int64_t n : kLengths) {
        SCOPED_TRACE(::testing::Message() << "p=" << p << " offset=" << offset << " n=" << n);
        // Samples of 7 elements (odd: vector loads straddle sample ends),
        // this launch's first sample 5 of every third.
        const DropoutKey key{.seed = 1234, .offset = offset, .sample_size = 7, .first_sample = 5,
                             .sample_stride = 3};
        const auto x = Random(n, 4);
        Tensor c = Host(std::vector<float>(n), {n});
        ASSERT_TRUE(CpuOps().DropoutForward(kCpuCtx, c, Host(x, {n}), p, key).ok());
        Tensor g = GpuZeros({n}, DType::kF32);
        ASSERT_TRUE(
            GpuOps().DropoutForward(GpuCtx(), g, Gpu(x, {n}, DType::kF32), p, key).ok());
        // Same mask and the same single f32 multiply: identical bits.
        EXPECT_EQ(Floats(g), Floats(c));
        Tensor cdx = Host(std::vector<float>(n), {n});
        ASSERT_TRUE(CpuOps().DropoutBackward(kCpuCtx, cdx, Host(x, {n}), p, key).ok());
        Tensor gdx = GpuZeros({n}, DType::kBF16);
        ASSERT_TRUE(GpuOps()
                        .DropoutBackward(GpuCtx(), gdx, Gpu(x, {n}, DType::kBF16), p, key)
                        .ok());
        const auto got = Floats(gdx), want = Floats(cdx);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i] == 0.0f, want[i] == 0.0f) << i;
      }
    }
  }
}

TEST(DropoutParityTest, RejectsPOutOfRange) {
  Tensor x = GpuZeros({8}, DType::kF32), y = GpuZeros({8}, DType::kF32);
  EXPECT_FALSE(GpuOps().DropoutForward(GpuCtx(), y, x, 1.0f, {.seed = 1}).ok());
  EXPECT_FALSE(GpuOps().DropoutForward(GpuCtx(), y, x, -0.1f, {.seed = 1}).ok());
}

TEST(ZeroTensorsTest, ManyBuffersAnySizeAndAlignmentAndNothingElse) {
  // 150 tensors (three launches), f32 and bf16, sizes across the 64 KiB
  // chunks and below 16 bytes, some views at 2- and 4-byte offsets; the
  // element just past each view must survive.
  std::vector<Tensor> bases, views;
  for (int i = 0; i < 150; ++i) {
    const DType dt = i % 2 ? DType::kBF16 : DType::kF32;
    const int64_t n = (i * 7919) % 70000 + (i % 5);
    const int64_t offset = i % 3;
    bases.push_back(Gpu(std::vector<float>(n + offset + 1, 1.5f), {n + offset + 1}, dt));
    views.push_back(bases.back().Slice(0, offset, offset + n));
  }
  ASSERT_TRUE(GpuOps().ZeroTensors(GpuCtx(), views).ok());
  for (int i = 0; i < 150; ++i) {
    const std::vector<float> v = Floats(bases[i]);
    const int64_t offset = i % 3, n = views[i].numel();
    for (int64_t j = 0; j < static_cast<int64_t>(v.size()); ++j) {
      const bool inside = j >= offset && j < offset + n;
      ASSERT_EQ(v[j], inside ? 0.0f : 1.5f) << "tensor " << i << " element " << j;
    }
  }
  EXPECT_TRUE(GpuOps().ZeroTensors(GpuCtx(), {}).ok());
  std::vector<Tensor> on_cpu = {Host(std::vector<float>(4, 1.f), {4})};
  EXPECT_FALSE(GpuOps().ZeroTensors(GpuCtx(), on_cpu).ok());
}

TEST(SumParityTest, SumAndAccumulate) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{777}, int64_t{3} << 20}) {
      const auto x = RoundTo(dt, Random(n, 5));
      Tensor c = Host({0.5f}, {1});
      ASSERT_TRUE(CpuOps().Sum(kCpuCtx, c, Host(x, {n}), true).ok());
      Tensor g = Gpu({0.5f}, {1}, DType::kF32);
      ASSERT_TRUE(GpuOps().Sum(GpuCtx(), g, Gpu(x, {n}, dt), true).ok());
      EXPECT_TRUE(Close(Floats(g), Floats(c), kF32ReduceTol)) << n;
      ASSERT_TRUE(GpuOps().Sum(GpuCtx(), g, Gpu(x, {n}, dt), false).ok());
      EXPECT_NEAR(Floats(g)[0], Floats(c)[0] - 0.5f, 1e-4f * std::max(1.0f, std::fabs(Floats(c)[0])));
    }
  }
}

TEST(SumSquaresParityTest, ManyTensorsMixedDTypesAndDeterministic) {
  // 150 tensors: more than one launch's worth (64), some empty, mixed dtypes.
  std::vector<Tensor> cpu, gpu;
  for (int i = 0; i < 150; ++i) {
    const int64_t n = (i % 7 == 0) ? 0 : (i * 977) % 20000 + 1;
    const DType dt = i % 3 == 0 ? DType::kBF16 : DType::kF32;
    const auto x = RoundTo(dt, Random(n, 100 + i));
    cpu.push_back(Host(x, {n}));
    gpu.push_back(Gpu(x, {n}, dt));
  }
  Tensor c = Host({0.0f}, {1});
  ASSERT_TRUE(CpuOps().SumSquares(kCpuCtx, c, cpu).ok());
  std::vector<uint8_t> first;
  for (int run = 0; run < 2; ++run) {
    Tensor g = Gpu({123.0f}, {1}, DType::kF32);  // overwritten, not accumulated
    ASSERT_TRUE(GpuOps().SumSquares(GpuCtx(), g, gpu).ok());
    EXPECT_TRUE(Close(Floats(g), Floats(c), kF32ReduceTol));
    if (run == 0) {
      first = Bytes(g);
    } else {
      EXPECT_EQ(Bytes(g), first);
    }
  }
}

TEST(SumSquaresParityTest, NoTensorsGivesZero) {
  Tensor g = Gpu({5.0f}, {1}, DType::kF32);
  ASSERT_TRUE(GpuOps().SumSquares(GpuCtx(), g, {}).ok());
  EXPECT_EQ(Floats(g)[0], 0.0f);
}

}  // namespace
}  // namespace weft::cuda::testing
