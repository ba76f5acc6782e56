// CPU-vs-CUDA parity for GELU, SwiGLU, Add, Scale, Dropout, Sum and
// SumSquares, and ZeroTensors.
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

// H odd or not a multiple of the vector width (scalar path) and multiples
// of 8 (vector path, Llama's 11008 among them).
struct SwiGluShape {
  int64_t rows, h;
};
const SwiGluShape kSwiGluShapes[] = {{1, 1}, {7, 37}, {64, 64}, {33, 1000}, {5, 4099}, {16, 11008}};

TEST(SwiGluParityTest, ForwardAndBackward) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (const SwiGluShape& s : kSwiGluShapes) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " " << s.rows << "x" << s.h);
      const int64_t n = s.rows * s.h;
      const auto gu = RoundTo(dt, Random(2 * n, 1, 5.0f));
      const auto dout = RoundTo(dt, Random(n, 2));
      Tensor cout = Host(std::vector<float>(n), {s.rows, s.h});
      Tensor cdgu = Host(std::vector<float>(2 * n), {s.rows, 2 * s.h});
      ASSERT_TRUE(CpuOps().SwiGluForward(kCpuCtx, cout, Host(gu, {s.rows, 2 * s.h})).ok());
      ASSERT_TRUE(CpuOps()
                      .SwiGluBackward(kCpuCtx, cdgu, Host(dout, {s.rows, s.h}),
                                      Host(gu, {s.rows, 2 * s.h}))
                      .ok());
      Tensor ggu = Gpu(gu, {s.rows, 2 * s.h}, dt);
      Tensor gout = GpuZeros({s.rows, s.h}, dt), gdgu = GpuZeros({s.rows, 2 * s.h}, dt);
      ASSERT_TRUE(GpuOps().SwiGluForward(GpuCtx(), gout, ggu).ok());
      ASSERT_TRUE(
          GpuOps().SwiGluBackward(GpuCtx(), gdgu, Gpu(dout, {s.rows, s.h}, dt), ggu).ok());
      EXPECT_TRUE(Close(Floats(gout), Floats(cout), TolFor(dt, false))) << "out";
      EXPECT_TRUE(Close(Floats(gdgu), Floats(cdgu), TolFor(dt, false))) << "dgate_up";
    }
  }
}

// dgate_up may overwrite gate_up: the same bits as a separate dgate_up.
TEST(SwiGluParityTest, BackwardInPlaceOverGateUp) {
  const int64_t rows = 64, h = 1000;
  Tensor dout = Gpu(Random(rows * h, 2), {rows, h}, DType::kBF16);
  Tensor gu = Gpu(Random(2 * rows * h, 1, 5.0f), {rows, 2 * h}, DType::kBF16);
  Tensor dgu = GpuZeros({rows, 2 * h}, DType::kBF16);
  ASSERT_TRUE(GpuOps().SwiGluBackward(GpuCtx(), dgu, dout, gu).ok());
  ASSERT_TRUE(GpuOps().SwiGluBackward(GpuCtx(), gu, dout, gu).ok());
  EXPECT_EQ(Bytes(gu), Bytes(dgu));
}

TEST(SwiGluParityTest, OddWidthIsAnError) {
  Tensor gu = GpuZeros({2, 7}, DType::kF32), out = GpuZeros({2, 3}, DType::kF32);
  EXPECT_EQ(GpuOps().SwiGluForward(GpuCtx(), out, gu).code(), absl::StatusCode::kInvalidArgument);
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
