// CPU-vs-CUDA parity for layernorm forward, fused residual + layernorm, and
// the one-pass backward (f32 and bf16; C = 768 on the vector path, C = 13 on
// the scalar one; backward also C = 100 (f32 vector, bf16 scalar), C = 1600
// (6 warps a block, shared memory past 48 KiB), row counts that leave a
// block's chunk short; residual none, dx itself, or another tensor), plus
// bitwise determinism of the parameter-gradient reduction. RMSNorm (the
// same kernels without mean and bias) gets the same cases, plus C = 4096
// (Llama's, rows reread each sweep).
// Tolerances: f32 1e-5 for activations, 1e-4 for dweight/dbias (sums over
// rows); bf16 1e-2 / 2e-2.
#include <cstdlib>

#include "core/kernels/cuda/layernorm.h"
#include "core/kernels/cuda/parity_util.h"
#include "gtest/gtest.h"

namespace weft::cuda::testing {
namespace {

constexpr float kEps = 1e-5f;

struct LnShape {
  int64_t rows, c;
};
const LnShape kShapes[] = {{1, 13}, {37, 13}, {64, 768}, {129, 96}};

TEST(LayerNormParityTest, Forward) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (const LnShape& s : kShapes) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " " << s.rows << "x" << s.c);
      const auto x = RoundTo(dt, Random(s.rows * s.c, 1, 3.0f));
      const auto w = RoundTo(dt, Random(s.c, 2));
      const auto b = RoundTo(dt, Random(s.c, 3));
      Tensor cpu_out = Host(std::vector<float>(x.size()), {s.rows, s.c});
      Tensor cpu_mean = Host(std::vector<float>(s.rows), {s.rows});
      Tensor cpu_rstd = Host(std::vector<float>(s.rows), {s.rows});
      ASSERT_TRUE(CpuOps()
                      .LayerNormForward(kCpuCtx, cpu_out, cpu_mean, cpu_rstd,
                                        Host(x, {s.rows, s.c}), Host(w, {s.c}), Host(b, {s.c}),
                                        kEps)
                      .ok());
      Tensor out = GpuZeros({s.rows, s.c}, dt);
      Tensor mean = GpuZeros({s.rows}, DType::kF32), rstd = GpuZeros({s.rows}, DType::kF32);
      const absl::Status st =
          GpuOps().LayerNormForward(GpuCtx(), out, mean, rstd, Gpu(x, {s.rows, s.c}, dt),
                                    Gpu(w, {s.c}, dt), Gpu(b, {s.c}, dt), kEps);
      ASSERT_TRUE(st.ok()) << st;
      EXPECT_TRUE(Close(Floats(out), Floats(cpu_out), TolFor(dt, false)));
      EXPECT_TRUE(Close(Floats(mean), Floats(cpu_mean), kF32Tol));
      EXPECT_TRUE(Close(Floats(rstd), Floats(cpu_rstd), kF32Tol));
    }
  }
}

TEST(LayerNormParityTest, ResidualForward) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (const LnShape& s : kShapes) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " " << s.rows << "x" << s.c);
      const auto a = RoundTo(dt, Random(s.rows * s.c, 1));
      const auto b = RoundTo(dt, Random(s.rows * s.c, 2));
      const auto w = RoundTo(dt, Random(s.c, 3));
      const auto bias = RoundTo(dt, Random(s.c, 4));
      // The CPU normalizes the residual as the GPU stores it (rounded).
      std::vector<float> sum(a.size());
      for (size_t i = 0; i < a.size(); ++i) sum[i] = a[i] + b[i];
      const auto res = RoundTo(dt, sum);
      Tensor cpu_out = Host(std::vector<float>(a.size()), {s.rows, s.c});
      Tensor cpu_mean = Host(std::vector<float>(s.rows), {s.rows});
      Tensor cpu_rstd = Host(std::vector<float>(s.rows), {s.rows});
      ASSERT_TRUE(CpuOps()
                      .LayerNormForward(kCpuCtx, cpu_out, cpu_mean, cpu_rstd,
                                        Host(res, {s.rows, s.c}), Host(w, {s.c}),
                                        Host(bias, {s.c}), kEps)
                      .ok());
      Tensor res_out = GpuZeros({s.rows, s.c}, dt), out = GpuZeros({s.rows, s.c}, dt);
      Tensor mean = GpuZeros({s.rows}, DType::kF32), rstd = GpuZeros({s.rows}, DType::kF32);
      const absl::Status st = GpuOps().ResidualLayerNormForward(
          GpuCtx(), res_out, out, mean, rstd, Gpu(a, {s.rows, s.c}, dt),
          Gpu(b, {s.rows, s.c}, dt), Gpu(w, {s.c}, dt), Gpu(bias, {s.c}, dt), kEps);
      ASSERT_TRUE(st.ok()) << st;
      EXPECT_EQ(Floats(res_out), res) << "residual is a + b rounded once";
      EXPECT_TRUE(Close(Floats(out), Floats(cpu_out), TolFor(dt, false)));
      EXPECT_TRUE(Close(Floats(mean), Floats(cpu_mean), kF32Tol));
      EXPECT_TRUE(Close(Floats(rstd), Floats(cpu_rstd), kF32Tol));
    }
  }
}

const LnShape kBackwardShapes[] = {{1, 13},  {37, 13},  {64, 768}, {300, 768},
                                    {129, 96}, {50, 100}, {23, 1600}};

// Which tensor the backward adds dx onto.
enum class Residual { kNone, kDx, kOther };

TEST(LayerNormParityTest, Backward) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (DType grad_dt : {DType::kF32, DType::kBF16}) {
      for (Residual residual : {Residual::kNone, Residual::kDx, Residual::kOther}) {
        for (const LnShape& s : kBackwardShapes) {
          SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " grads " << DTypeName(grad_dt)
                                            << " residual=" << static_cast<int>(residual) << " "
                                            << s.rows << "x" << s.c);
          const int64_t n = s.rows * s.c;
          const auto x = RoundTo(dt, Random(n, 1, 2.0f));
          const auto dy = RoundTo(dt, Random(n, 2));
          const auto w = RoundTo(dt, Random(s.c, 3));
          const auto dx0 = RoundTo(dt, Random(n, 4));
          const auto dw0 = RoundTo(grad_dt, Random(s.c, 5));
          const auto db0 = RoundTo(grad_dt, Random(s.c, 6));
          const auto other = RoundTo(dt, Random(n, 7));
          // Statistics from the CPU forward feed both backward passes.
          Tensor out = Host(std::vector<float>(n), {s.rows, s.c});
          Tensor mean = Host(std::vector<float>(s.rows), {s.rows});
          Tensor rstd = Host(std::vector<float>(s.rows), {s.rows});
          ASSERT_TRUE(CpuOps()
                          .LayerNormForward(kCpuCtx, out, mean, rstd, Host(x, {s.rows, s.c}),
                                            Host(w, {s.c}), Host(w, {s.c}), kEps)
                          .ok());
          Tensor cdx = Host(dx0, {s.rows, s.c}), cdw = Host(dw0, {s.c}), cdb = Host(db0, {s.c});
          const Tensor cres = residual == Residual::kDx      ? cdx
                              : residual == Residual::kOther ? Host(other, {s.rows, s.c})
                                                             : Tensor();
          ASSERT_TRUE(CpuOps()
                          .LayerNormBackward(kCpuCtx, cdx, cdw, cdb, Host(dy, {s.rows, s.c}),
                                             Host(x, {s.rows, s.c}), Host(w, {s.c}), mean, rstd,
                                             cres)
                          .ok());
          Tensor gdx = Gpu(dx0, {s.rows, s.c}, dt);
          Tensor gdw = Gpu(dw0, {s.c}, grad_dt), gdb = Gpu(db0, {s.c}, grad_dt);
          const Tensor gres = residual == Residual::kDx      ? gdx
                              : residual == Residual::kOther ? Gpu(other, {s.rows, s.c}, dt)
                                                             : Tensor();
          const absl::Status st = GpuOps().LayerNormBackward(
              GpuCtx(), gdx, gdw, gdb, Gpu(dy, {s.rows, s.c}, dt), Gpu(x, {s.rows, s.c}, dt),
              Gpu(w, {s.c}, dt), Gpu(Floats(mean), {s.rows}, DType::kF32),
              Gpu(Floats(rstd), {s.rows}, DType::kF32), gres);
          ASSERT_TRUE(st.ok()) << st;
          EXPECT_TRUE(Close(Floats(gdx), Floats(cdx), TolFor(dt, false))) << "dx";
          const Tolerance reduce = grad_dt == DType::kBF16 ? kBf16ReduceTol : kF32ReduceTol;
          EXPECT_TRUE(Close(Floats(gdw), Floats(cdw), reduce)) << "dweight";
          EXPECT_TRUE(Close(Floats(gdb), Floats(cdb), reduce)) << "dbias";
          if (residual == Residual::kOther) {
            EXPECT_EQ(Floats(gres), other) << "residual is read only";
          }
        }
      }
    }
  }
}

// dx may overwrite dy: the same bits as writing a separate dx.
TEST(LayerNormParityTest, BackwardInPlaceOverDy) {
  const int64_t rows = 300, c = 768, n = rows * c;
  Tensor x = Gpu(Random(n, 1), {rows, c}, DType::kBF16);
  Tensor w = Gpu(Random(c, 3), {c}, DType::kBF16);
  Tensor mean = Gpu(Random(rows, 4, 0.1f), {rows}, DType::kF32);
  Tensor rstd = Gpu(std::vector<float>(rows, 1.5f), {rows}, DType::kF32);
  Tensor residual = Gpu(Random(n, 5), {rows, c}, DType::kBF16);
  std::vector<uint8_t> want;
  for (bool in_place : {false, true}) {
    Tensor dy = Gpu(Random(n, 2), {rows, c}, DType::kBF16);
    Tensor dx = in_place ? dy : GpuZeros({rows, c}, DType::kBF16);
    Tensor dw = GpuZeros({c}, DType::kF32), db = GpuZeros({c}, DType::kF32);
    ASSERT_TRUE(
        GpuOps().LayerNormBackward(GpuCtx(), dx, dw, db, dy, x, w, mean, rstd, residual).ok());
    if (!in_place) want = Bytes(dx);
    else EXPECT_EQ(Bytes(dx), want);
  }
}

TEST(LayerNormParityTest, BackwardWiderThanSharedMemoryIsAnError) {
  const int64_t c = LayerNormBackwardMaxChannels() + 8;
  Tensor x = GpuZeros({2, c}, DType::kBF16), dy = GpuZeros({2, c}, DType::kBF16);
  Tensor dx = GpuZeros({2, c}, DType::kBF16), w = GpuZeros({c}, DType::kBF16);
  Tensor dw = GpuZeros({c}, DType::kF32), db = GpuZeros({c}, DType::kF32);
  Tensor mean = GpuZeros({2}, DType::kF32), rstd = GpuZeros({2}, DType::kF32);
  const absl::Status st =
      GpuOps().LayerNormBackward(GpuCtx(), dx, dw, db, dy, x, w, mean, rstd, Tensor());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("C <= "), std::string::npos) << st;
}

TEST(LayerNormParityTest, BackwardIsBitwiseDeterministic) {
  const int64_t rows = 8192, c = 768, n = rows * c;
  Tensor x = Gpu(Random(n, 1), {rows, c}, DType::kBF16);
  Tensor dy = Gpu(Random(n, 2), {rows, c}, DType::kBF16);
  Tensor w = Gpu(Random(c, 3), {c}, DType::kBF16);
  Tensor mean = Gpu(Random(rows, 4, 0.1f), {rows}, DType::kF32);
  Tensor rstd = Gpu(std::vector<float>(rows, 1.5f), {rows}, DType::kF32);
  std::vector<uint8_t> dx1, dw1, db1;
  for (int run = 0; run < 2; ++run) {
    Tensor dx = GpuZeros({rows, c}, DType::kBF16);
    Tensor dw = GpuZeros({c}, DType::kF32), db = GpuZeros({c}, DType::kF32);
    ASSERT_TRUE(
        GpuOps().LayerNormBackward(GpuCtx(), dx, dw, db, dy, x, w, mean, rstd, Tensor()).ok());
    if (run == 0) {
      dx1 = Bytes(dx);
      dw1 = Bytes(dw);
      db1 = Bytes(db);
    } else {
      EXPECT_EQ(Bytes(dx), dx1);
      EXPECT_EQ(Bytes(dw), dw1);
      EXPECT_EQ(Bytes(db), db1);
    }
  }
}

// Rows kept in registers (the default: up to 8 vectors a lane forward, 4
// backward) and rows reread each sweep (WEFT_LN_KERNEL=reread) give the
// same bits: plain forward, residual forward (with its statistics) and
// backward with the residual gradient, every op under the kernel named.
// C = 768 (GPT-2 small, 3 steps) and 1024 (4 steps, the backward's widest).
TEST(LayerNormParityTest, ResidentRowsEqualRereadRowsBitwise) {
  for (int64_t c : {768, 1024}) {
    const int64_t rows = 4096, n = rows * c;
    Tensor a = Gpu(Random(n, 1), {rows, c}, DType::kBF16);
    Tensor b = Gpu(Random(n, 2), {rows, c}, DType::kBF16);
    Tensor dy = Gpu(Random(n, 3), {rows, c}, DType::kBF16);
    Tensor w = Gpu(Random(c, 4), {c}, DType::kBF16), bias = Gpu(Random(c, 5), {c}, DType::kBF16);
    constexpr int kOutputs = 9;
    std::vector<uint8_t> got[2][kOutputs];
    const char* kernels[2] = {"reread", "resident"};
    for (int k = 0; k < 2; ++k) {
      setenv("WEFT_LN_KERNEL", kernels[k], 1);
      Tensor plain = GpuZeros({rows, c}, DType::kBF16);
      Tensor pmean = GpuZeros({rows}, DType::kF32), prstd = GpuZeros({rows}, DType::kF32);
      Tensor res = GpuZeros({rows, c}, DType::kBF16), out = GpuZeros({rows, c}, DType::kBF16);
      Tensor mean = GpuZeros({rows}, DType::kF32), rstd = GpuZeros({rows}, DType::kF32);
      Tensor dx = Gpu(Random(n, 6), {rows, c}, DType::kBF16);
      Tensor dw = GpuZeros({c}, DType::kF32), db = GpuZeros({c}, DType::kF32);
      absl::Status st = GpuOps().LayerNormForward(GpuCtx(), plain, pmean, prstd, a, w, bias, kEps);
      if (st.ok()) {
        st = GpuOps().ResidualLayerNormForward(GpuCtx(), res, out, mean, rstd, a, b, w, bias, kEps);
      }
      if (st.ok()) st = GpuOps().LayerNormBackward(GpuCtx(), dx, dw, db, dy, res, w, mean, rstd, dx);
      unsetenv("WEFT_LN_KERNEL");
      ASSERT_TRUE(st.ok()) << kernels[k] << ": " << st;
      int i = 0;
      for (const Tensor* t : {&plain, &pmean, &prstd, &res, &out, &mean, &rstd, &dx, &dw}) {
        got[k][i++] = Bytes(*t);
      }
      ASSERT_EQ(i, kOutputs);
    }
    for (int i = 0; i < kOutputs; ++i) {
      EXPECT_TRUE(got[0][i] == got[1][i]) << "C=" << c << " output " << i << " differs";
    }
  }
}

TEST(LayerNormParityTest, MismatchedWeightDTypeIsAnError) {
  Tensor x = GpuZeros({2, 8}, DType::kBF16), out = GpuZeros({2, 8}, DType::kBF16);
  Tensor mean = GpuZeros({2}, DType::kF32), rstd = GpuZeros({2}, DType::kF32);
  Tensor w = GpuZeros({8}, DType::kF32), b = GpuZeros({8}, DType::kBF16);
  EXPECT_FALSE(GpuOps().LayerNormForward(GpuCtx(), out, mean, rstd, x, w, b, kEps).ok());
}

// RMSNorm: plain and fused with the residual add. The CPU normalizes the
// residual as the GPU stores it (a + b rounded once).
TEST(RmsNormParityTest, Forward) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (bool fused : {false, true}) {
      for (const LnShape& s : kShapes) {
        SCOPED_TRACE(::testing::Message() << DTypeName(dt) << (fused ? " fused " : " ") << s.rows
                                          << "x" << s.c);
        const int64_t n = s.rows * s.c;
        const auto a = RoundTo(dt, Random(n, 1, 2.0f));
        const auto b = RoundTo(dt, Random(n, 2));
        const auto w = RoundTo(dt, Random(s.c, 3));
        std::vector<float> x = a;
        if (fused) {
          for (int64_t i = 0; i < n; ++i) x[i] = a[i] + b[i];
          x = RoundTo(dt, x);
        }
        Tensor no_residual;
        Tensor cpu_out = Host(std::vector<float>(n), {s.rows, s.c});
        Tensor cpu_rstd = Host(std::vector<float>(s.rows), {s.rows});
        ASSERT_TRUE(CpuOps()
                        .RmsNormForward(kCpuCtx, no_residual, cpu_out, cpu_rstd,
                                        Host(x, {s.rows, s.c}), Tensor(), Host(w, {s.c}), kEps)
                        .ok());
        Tensor res_out = GpuZeros({s.rows, s.c}, dt), out = GpuZeros({s.rows, s.c}, dt);
        Tensor rstd = GpuZeros({s.rows}, DType::kF32);
        const absl::Status st = GpuOps().RmsNormForward(
            GpuCtx(), res_out, out, rstd, Gpu(a, {s.rows, s.c}, dt),
            fused ? Gpu(b, {s.rows, s.c}, dt) : Tensor(), Gpu(w, {s.c}, dt), kEps);
        ASSERT_TRUE(st.ok()) << st;
        EXPECT_EQ(Floats(res_out), fused ? x : std::vector<float>(n))
            << (fused ? "residual is a + b rounded once" : "residual_out is not touched");
        EXPECT_TRUE(Close(Floats(out), Floats(cpu_out), TolFor(dt, false)));
        EXPECT_TRUE(Close(Floats(rstd), Floats(cpu_rstd), kF32Tol));
      }
    }
  }
}

const LnShape kRmsBackwardShapes[] = {{1, 13},   {37, 13},  {64, 768}, {300, 768},
                                      {129, 96}, {50, 100}, {23, 1600}, {9, 4096}};

TEST(RmsNormParityTest, Backward) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (DType grad_dt : {DType::kF32, DType::kBF16}) {
      for (Residual residual : {Residual::kNone, Residual::kDx, Residual::kOther}) {
        for (const LnShape& s : kRmsBackwardShapes) {
          SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " grads " << DTypeName(grad_dt)
                                            << " residual=" << static_cast<int>(residual) << " "
                                            << s.rows << "x" << s.c);
          const int64_t n = s.rows * s.c;
          const auto x = RoundTo(dt, Random(n, 1, 2.0f));
          const auto dy = RoundTo(dt, Random(n, 2));
          const auto w = RoundTo(dt, Random(s.c, 3));
          const auto dx0 = RoundTo(dt, Random(n, 4));
          const auto dw0 = RoundTo(grad_dt, Random(s.c, 5));
          const auto other = RoundTo(dt, Random(n, 7));
          // rstd from the CPU forward feeds both backward passes.
          Tensor no_residual;
          Tensor out = Host(std::vector<float>(n), {s.rows, s.c});
          Tensor rstd = Host(std::vector<float>(s.rows), {s.rows});
          ASSERT_TRUE(CpuOps()
                          .RmsNormForward(kCpuCtx, no_residual, out, rstd, Host(x, {s.rows, s.c}),
                                          Tensor(), Host(w, {s.c}), kEps)
                          .ok());
          Tensor cdx = Host(dx0, {s.rows, s.c}), cdw = Host(dw0, {s.c});
          const Tensor cres = residual == Residual::kDx      ? cdx
                              : residual == Residual::kOther ? Host(other, {s.rows, s.c})
                                                             : Tensor();
          ASSERT_TRUE(CpuOps()
                          .RmsNormBackward(kCpuCtx, cdx, cdw, Host(dy, {s.rows, s.c}),
                                           Host(x, {s.rows, s.c}), Host(w, {s.c}), rstd, cres)
                          .ok());
          Tensor gdx = Gpu(dx0, {s.rows, s.c}, dt), gdw = Gpu(dw0, {s.c}, grad_dt);
          const Tensor gres = residual == Residual::kDx      ? gdx
                              : residual == Residual::kOther ? Gpu(other, {s.rows, s.c}, dt)
                                                             : Tensor();
          const absl::Status st = GpuOps().RmsNormBackward(
              GpuCtx(), gdx, gdw, Gpu(dy, {s.rows, s.c}, dt), Gpu(x, {s.rows, s.c}, dt),
              Gpu(w, {s.c}, dt), Gpu(Floats(rstd), {s.rows}, DType::kF32), gres);
          ASSERT_TRUE(st.ok()) << st;
          EXPECT_TRUE(Close(Floats(gdx), Floats(cdx), TolFor(dt, false))) << "dx";
          const Tolerance reduce = grad_dt == DType::kBF16 ? kBf16ReduceTol : kF32ReduceTol;
          EXPECT_TRUE(Close(Floats(gdw), Floats(cdw), reduce)) << "dweight";
          if (residual == Residual::kOther) {
            EXPECT_EQ(Floats(gres), other) << "residual is read only";
          }
        }
      }
    }
  }
}

// dx over dy gives the bits of a separate dx; two runs give the same bits.
TEST(RmsNormParityTest, BackwardInPlaceOverDyAndBitwiseDeterministic) {
  const int64_t rows = 2048, c = 4096, n = rows * c;
  Tensor x = Gpu(Random(n, 1), {rows, c}, DType::kBF16);
  Tensor w = Gpu(Random(c, 3), {c}, DType::kBF16);
  Tensor rstd = Gpu(std::vector<float>(rows, 1.5f), {rows}, DType::kF32);
  Tensor residual = Gpu(Random(n, 5), {rows, c}, DType::kBF16);
  std::vector<uint8_t> want_dx, want_dw;
  for (int run = 0; run < 3; ++run) {
    const bool in_place = run == 2;
    Tensor dy = Gpu(Random(n, 2), {rows, c}, DType::kBF16);
    Tensor dx = in_place ? dy : GpuZeros({rows, c}, DType::kBF16);
    Tensor dw = GpuZeros({c}, DType::kF32);
    ASSERT_TRUE(GpuOps().RmsNormBackward(GpuCtx(), dx, dw, dy, x, w, rstd, residual).ok());
    if (run == 0) {
      want_dx = Bytes(dx);
      want_dw = Bytes(dw);
    } else {
      EXPECT_EQ(Bytes(dx), want_dx) << "run " << run;
      EXPECT_EQ(Bytes(dw), want_dw) << "run " << run;
    }
  }
}

TEST(RmsNormParityTest, BackwardWiderThanSharedMemoryIsAnError) {
  const int64_t c = RmsNormBackwardMaxChannels() + 8;
  Tensor x = GpuZeros({2, c}, DType::kBF16), dy = GpuZeros({2, c}, DType::kBF16);
  Tensor dx = GpuZeros({2, c}, DType::kBF16), w = GpuZeros({c}, DType::kBF16);
  Tensor dw = GpuZeros({c}, DType::kF32), rstd = GpuZeros({2}, DType::kF32);
  const absl::Status st = GpuOps().RmsNormBackward(GpuCtx(), dx, dw, dy, x, w, rstd, Tensor());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("C <= "), std::string::npos) << st;
}

}  // namespace
}  // namespace weft::cuda::testing
