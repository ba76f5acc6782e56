// CPU-vs-CUDA parity for Gemm (every transpose, every epilogue, accumulate,
// f32 and bf16, odd shapes that force the unfused fallback) and BiasGrad.
// Tolerances (parity_util.h): f32 outputs 1e-4 (also from bf16 inputs),
// bf16 outputs 2e-2, relative to the largest reference value.
#include <cstdlib>
#include <utility>

#include "core/kernels/cuda/parity_util.h"
#include "gtest/gtest.h"

namespace weft::cuda::testing {
namespace {

struct Case {
  int64_t m, n, k;
  bool ta, tb;
};

// Runs one GEMM on both devices; ab and out are the GPU dtypes, the CPU
// sees the same (rounded) values in f32.
// with_a_col_sums: the weight-gradient form, where the bias gradient (the
// column sums of a) comes out of the same GEMM (cuBLASLt BGRADB).
void CheckGemm(const Case& c, DType ab, DType out_dtype, Epilogue epi, bool accumulate,
               bool with_bias_grad, bool with_a_col_sums = false) {
  SCOPED_TRACE(::testing::Message() << "m=" << c.m << " n=" << c.n << " k=" << c.k << " ta="
                                  << c.ta << " tb=" << c.tb << " ab=" << DTypeName(ab)
                                  << " out=" << DTypeName(out_dtype)
                                  << " epilogue=" << static_cast<int>(epi)
                                  << " a_col_sums=" << with_a_col_sums);
  const Shape a_shape = c.ta ? Shape{c.k, c.m} : Shape{c.m, c.k};
  const Shape b_shape = c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n};
  const std::vector<float> a = RoundTo(ab, Random(c.m * c.k, 1));
  const std::vector<float> b = RoundTo(ab, Random(c.k * c.n, 2));
  const std::vector<float> out0 = RoundTo(out_dtype, Random(c.m * c.n, 3));
  const std::vector<float> bias = RoundTo(out_dtype, Random(c.n, 4));
  const std::vector<float> aux0 = RoundTo(out_dtype, Random(c.m * c.n, 5, 2.0f));
  const std::vector<float> bg0 = Random(c.n, 6);
  const std::vector<float> as0 = Random(c.m, 8);
  const bool has_bias = epi == Epilogue::kBias || epi == Epilogue::kBiasGelu;
  const bool has_aux = epi == Epilogue::kBiasGelu || epi == Epilogue::kDGelu;

  GemmArgs cpu{.out = Host(out0, {c.m, c.n}),
               .a = Host(a, a_shape),
               .b = Host(b, b_shape),
               .trans_a = c.ta,
               .trans_b = c.tb,
               .accumulate = accumulate,
               .epilogue = epi};
  GemmArgs gpu{.out = Gpu(out0, {c.m, c.n}, out_dtype),
               .a = Gpu(a, a_shape, ab),
               .b = Gpu(b, b_shape, ab),
               .trans_a = c.ta,
               .trans_b = c.tb,
               .accumulate = accumulate,
               .epilogue = epi};
  if (has_bias) {
    cpu.bias = Host(bias, {c.n});
    gpu.bias = Gpu(bias, {c.n}, out_dtype);
  }
  if (has_aux) {
    cpu.aux = Host(aux0, {c.m, c.n});
    gpu.aux = Gpu(aux0, {c.m, c.n}, out_dtype);
  }
  if (with_bias_grad) {
    cpu.bias_grad = Host(bg0, {c.n});
    gpu.bias_grad = Gpu(bg0, {c.n}, DType::kF32);
  }
  if (with_a_col_sums) {
    cpu.a_col_sums = Host(as0, {c.m});
    gpu.a_col_sums = Gpu(as0, {c.m}, DType::kF32);
  }
  ASSERT_TRUE(CpuOps().Gemm(kCpuCtx, cpu).ok());
  const absl::Status st = GpuOps().Gemm(GpuCtx(), gpu);
  ASSERT_TRUE(st.ok()) << st;
  // The CPU sees the GPU's (rounded) inputs, so only output rounding and
  // summation order differ: f32 outputs hold to 1e-4 even from bf16 inputs.
  const Tolerance tol = TolFor(out_dtype, true);
  EXPECT_TRUE(Close(Floats(gpu.out), Floats(cpu.out), tol)) << "out";
  if (epi == Epilogue::kBiasGelu) {
    EXPECT_TRUE(Close(Floats(gpu.aux), Floats(cpu.aux), tol)) << "aux";
  }
  if (with_bias_grad) {
    EXPECT_TRUE(Close(Floats(gpu.bias_grad), Floats(cpu.bias_grad), tol)) << "bias_grad";
  }
  if (with_a_col_sums) {
    // f32 sums of the same (rounded) inputs: only the order differs.
    EXPECT_TRUE(Close(Floats(gpu.a_col_sums), Floats(cpu.a_col_sums), TolFor(DType::kF32, true)))
        << "a_col_sums";
  }
}

const Case kShapes[] = {
    {64, 96, 80, false, false}, {64, 96, 80, false, true}, {64, 96, 80, true, false},
    {64, 96, 80, true, true},   {7, 13, 5, false, true},   {7, 13, 5, true, false},
    {33, 24, 17, false, false},
};

TEST(GemmParityTest, PlainF32AndBf16AllTransposes) {
  for (const Case& c : kShapes) {
    CheckGemm(c, DType::kF32, DType::kF32, Epilogue::kNone, false, false);
    CheckGemm(c, DType::kBF16, DType::kBF16, Epilogue::kNone, false, false);
  }
}

TEST(GemmParityTest, AccumulateIncludingBf16InputsIntoF32) {
  for (const Case& c : kShapes) {
    CheckGemm(c, DType::kF32, DType::kF32, Epilogue::kNone, true, false);
    // The weight-gradient case: bf16 activations, f32 gradient accumulator.
    CheckGemm(c, DType::kBF16, DType::kF32, Epilogue::kNone, true, false);
  }
}

TEST(GemmParityTest, Epilogues) {
  for (const Case& c : kShapes) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      CheckGemm(c, dt, dt, Epilogue::kBias, false, false);
      CheckGemm(c, dt, dt, Epilogue::kBiasGelu, false, false);
      CheckGemm(c, dt, dt, Epilogue::kDGelu, false, false);
      CheckGemm(c, dt, dt, Epilogue::kDGelu, false, /*with_bias_grad=*/true);
    }
  }
}

TEST(GemmParityTest, Gpt2Shapes) {
  // qkv projection forward, fc forward with GELU, fc backward with dGELU,
  // and the fc weight gradient (bf16 into f32), at B*T = 512 rows.
  CheckGemm({512, 2304, 768, false, true}, DType::kBF16, DType::kBF16, Epilogue::kBias, false,
            false);
  CheckGemm({512, 3072, 768, false, true}, DType::kBF16, DType::kBF16, Epilogue::kBiasGelu,
            false, false);
  CheckGemm({512, 3072, 768, false, false}, DType::kBF16, DType::kBF16, Epilogue::kDGelu, false,
            true);
  CheckGemm({3072, 768, 512, true, false}, DType::kBF16, DType::kF32, Epilogue::kNone, true,
            false);
}

TEST(GemmParityTest, WeightGradientWithItsBiasGradient) {
  // Every trans_a shape (7 x 13 forces the unfused fallback: 16-byte rows
  // are not possible), then GPT-2's qkv, proj and fc weight gradients.
  for (const Case& c : kShapes) {
    if (!c.ta) continue;
    CheckGemm(c, DType::kF32, DType::kF32, Epilogue::kNone, true, false, true);
    CheckGemm(c, DType::kBF16, DType::kF32, Epilogue::kNone, true, false, true);
    CheckGemm(c, DType::kBF16, DType::kBF16, Epilogue::kNone, false, false, true);
  }
  for (const Case& c : {Case{2304, 768, 512, true, false}, Case{768, 768, 512, true, false},
                        Case{768, 3072, 512, true, false}}) {
    CheckGemm(c, DType::kBF16, DType::kF32, Epilogue::kNone, true, false, true);
  }
  CheckGemm({4, 8, 0, true, false}, DType::kF32, DType::kF32, Epilogue::kNone, true, false, true);
}

// WEFT_BIAS_GRAD=column-sum: the weight gradient's bias gradient from our
// column sums after a plain GEMM instead of cuBLASLt's BGRADB. Same checks
// (the CPU's values, added once into what was there), GPT-2's shapes and
// the unfused fallback's.
TEST(GemmParityTest, WeightGradientWithColumnSumBiasGradient) {
  setenv("WEFT_BIAS_GRAD", "column-sum", 1);
  for (const Case& c : {Case{2304, 768, 512, true, false}, Case{768, 3072, 512, true, false},
                        Case{7, 13, 5, true, false}}) {
    CheckGemm(c, DType::kBF16, DType::kF32, Epilogue::kNone, true, false, true);
    CheckGemm(c, DType::kF32, DType::kF32, Epilogue::kNone, false, false, true);
  }
  unsetenv("WEFT_BIAS_GRAD");
}

TEST(GemmParityTest, UnknownBiasGradSourceIsAnError) {
  setenv("WEFT_BIAS_GRAD", "cublas", 1);
  Tensor out = GpuZeros({4, 8}, DType::kF32), sums = GpuZeros({4}, DType::kF32);
  Tensor a = Gpu(Random(12, 1), {3, 4}, DType::kF32), b = Gpu(Random(24, 2), {3, 8}, DType::kF32);
  const absl::Status st = GpuOps().Gemm(
      GpuCtx(), {.out = out, .a = a, .b = b, .trans_a = true, .a_col_sums = sums});
  unsetenv("WEFT_BIAS_GRAD");
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
}

// WEFT_GEMM_AUTOTUNE=1 times cuBLASLt's candidates on scratch outputs on a
// plan's first use: results still match the CPU, accumulation still adds
// exactly once, epilogue outputs (aux, bias gradients) are the real run's.
// Shapes no other test uses, so the plans are built here, tuned.
TEST(GemmParityTest, AutotuneLeavesResultsAsTheyWere) {
  setenv("WEFT_GEMM_AUTOTUNE", "1", 1);
  CheckGemm({200, 136, 72, false, true}, DType::kBF16, DType::kF32, Epilogue::kNone, true, false);
  CheckGemm({200, 136, 72, false, false}, DType::kBF16, DType::kBF16, Epilogue::kBiasGelu, false,
            false);
  CheckGemm({200, 136, 72, false, true}, DType::kBF16, DType::kBF16, Epilogue::kDGelu, false,
            true);
  CheckGemm({136, 72, 200, true, false}, DType::kBF16, DType::kF32, Epilogue::kNone, true, false,
            /*with_a_col_sums=*/true);
  CheckGemm({96, 40, 56, false, false}, DType::kF32, DType::kF32, Epilogue::kBias, false, false);
  unsetenv("WEFT_GEMM_AUTOTUNE");
}

TEST(GemmParityTest, ZeroK) {
  CheckGemm({4, 8, 0, false, false}, DType::kF32, DType::kF32, Epilogue::kNone, false, false);
  CheckGemm({4, 8, 0, false, false}, DType::kF32, DType::kF32, Epilogue::kNone, true, false);
}

TEST(GemmParityTest, IsDeterministic) {
  const int64_t m = 256, n = 768, k = 3072;
  Tensor a = Gpu(Random(m * k, 1), {m, k}, DType::kBF16);
  Tensor b = Gpu(Random(k * n, 2), {k, n}, DType::kBF16);
  std::vector<uint8_t> first;
  for (int run = 0; run < 2; ++run) {
    Tensor out = GpuZeros({m, n}, DType::kF32);
    ASSERT_TRUE(GpuOps().Gemm(GpuCtx(), {.out = out, .a = a, .b = b, .accumulate = true}).ok());
    if (run == 0) {
      first = Bytes(out);
    } else {
      EXPECT_EQ(Bytes(out), first);
    }
  }
}

TEST(GemmParityTest, BadShapesAreErrors) {
  Tensor a = GpuZeros({4, 3}, DType::kF32), b = GpuZeros({4, 2}, DType::kF32);
  Tensor out = GpuZeros({4, 2}, DType::kF32);
  EXPECT_FALSE(GpuOps().Gemm(GpuCtx(), {.out = out, .a = a, .b = b}).ok());
  Tensor b16 = GpuZeros({3, 2}, DType::kBF16);
  EXPECT_FALSE(GpuOps().Gemm(GpuCtx(), {.out = out, .a = a, .b = b16}).ok()) << "mixed a/b";
}

TEST(BiasGradParityTest, F32AndBf16AndDeterministic) {
  const std::pair<int64_t, int64_t> shapes[] = {{1, 5}, {300, 37}, {4096, 768}};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (auto [m, n] : shapes) {
      const std::vector<float> dy = RoundTo(dt, Random(m * n, 7));
      const std::vector<float> db0 = Random(n, 8);
      Tensor cpu_db = Host(db0, {n});
      ASSERT_TRUE(CpuOps().BiasGrad(kCpuCtx, cpu_db, Host(dy, {m, n})).ok());
      Tensor gpu_dy = Gpu(dy, {m, n}, dt);
      std::vector<uint8_t> first;
      for (int run = 0; run < 2; ++run) {
        Tensor gpu_db = Gpu(db0, {n}, DType::kF32);
        ASSERT_TRUE(GpuOps().BiasGrad(GpuCtx(), gpu_db, gpu_dy).ok());
        EXPECT_TRUE(Close(Floats(gpu_db), Floats(cpu_db), kF32ReduceTol)) << m << "x" << n;
        if (run == 0) {
          first = Bytes(gpu_db);
        } else {
          EXPECT_EQ(Bytes(gpu_db), first);
        }
      }
    }
  }
}

}  // namespace
}  // namespace weft::cuda::testing
