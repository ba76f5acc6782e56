// CPU-vs-CUDA parity for the mixture-of-experts kernels, f32 and bf16
// activations (the CPU runs f32 on the bf16-rounded inputs): router
// softmax + top-k (k = 1, 2) and its backward with the balance and z-loss
// terms, the row gather (plain and gate-weighted) and its inverse combine,
// and the gate dot products. Indices must match exactly; f32 outputs
// (probabilities, lse, gates, dot products) to 1e-5 (1e-4 for the dot
// products over C), bf16 outputs to 1e-2. The CPU emulator runs the same
// kernels against double references (emulation/moe_check.cc).
#include "core/kernels/cuda/parity_util.h"
#include "core/kernels/moe_ops.h"
#include "gtest/gtest.h"

namespace weft::cuda::testing {
namespace {

MoeKernelOps& CpuMoe() { return **GetMoeKernelOps(DeviceType::kCPU); }
MoeKernelOps& GpuMoe() { return **GetMoeKernelOps(DeviceType::kCUDA); }

std::vector<int32_t> Ints(const Tensor& t) { return *t.ToVector<int32_t>(); }

void RouterTopKAndBackward(DType dt) {
  SCOPED_TRACE(DTypeName(dt));
  const int64_t n = 97, e = 8;
  const RouterSpec specs[] = {{.k = 1, .normalize = false},
                              {.k = 2},
                              {.k = 8},
                              {.k = 8, .normalize = false},
                              {.k = 2, .score = RouterScore::kSigmoid}};
  for (const RouterSpec& spec : specs) {
    const int k = spec.k;
    const bool sigmoid = spec.score == RouterScore::kSigmoid;
    SCOPED_TRACE(::testing::Message() << "k=" << k << (sigmoid ? " sigmoid" : "")
                                      << (spec.normalize ? " renormalised" : " raw"));
    // bf16 rounding makes exact ties likely: both sides keep the lower index.
    const auto logits = RoundTo(dt, Random(n * e, 1, 3.0f));
    Tensor cp = Host(std::vector<float>(n * e), {n, e}), cl = Host(std::vector<float>(n), {n});
    Tensor ci = HostI32(std::vector<int32_t>(n * k), {n, k});
    Tensor cg = Host(std::vector<float>(n * k), {n, k});
    ASSERT_TRUE(CpuMoe().RouterTopK(kCpuCtx, cp, cl, ci, cg, Host(logits, {n, e}), spec).ok());
    Tensor gp = GpuZeros({n, e}, DType::kF32), gl = GpuZeros({n}, DType::kF32);
    Tensor gi = GpuI32(std::vector<int32_t>(n * k), {n, k});
    Tensor gg = GpuZeros({n, k}, DType::kF32);
    ASSERT_TRUE(
        GpuMoe().RouterTopK(GpuCtx(), gp, gl, gi, gg, Gpu(logits, {n, e}, dt), spec).ok());
    EXPECT_EQ(Ints(gi), Ints(ci));
    EXPECT_TRUE(Close(Floats(gp), Floats(cp), kF32Tol));
    EXPECT_TRUE(Close(Floats(gl), Floats(cl), kF32Tol));
    EXPECT_TRUE(Close(Floats(gg), Floats(cg), kF32Tol));

    const auto dgates = Random(n * k, 2), extra = Random(n * e, 3, 0.1f);
    Tensor cd = Host(std::vector<float>(n * e), {n, e});
    ASSERT_TRUE(CpuMoe()
                    .RouterTopKBackward(kCpuCtx, cd, Host(dgates, {n, k}), cp, cl, ci,
                                        Host(extra, {n, e}), sigmoid ? 0.f : 0.01f, spec)
                    .ok());
    Tensor gd = GpuZeros({n, e}, dt);
    ASSERT_TRUE(GpuMoe()
                    .RouterTopKBackward(GpuCtx(), gd, Gpu(dgates, {n, k}, DType::kF32), gp, gl,
                                        gi, Gpu(extra, {n, e}, DType::kF32),
                                        sigmoid ? 0.f : 0.01f, spec)
                    .ok());
    EXPECT_TRUE(Close(Floats(gd), Floats(cd), TolFor(dt, false)));
  }
}

void GatherCombineAndDots(DType dt) {
  SCOPED_TRACE(DTypeName(dt));
  const int64_t n = 5, c = 67;
  const int k = 2;
  const std::vector<int32_t> slots = {1, 4, 2, -1, 0, 3, 5, 6, -1, -1};
  const std::vector<int32_t> assign = {4, 0, 2, 5, 1, 6, 7};
  const int64_t m = static_cast<int64_t>(assign.size());
  const auto x = RoundTo(dt, Random(n * c, 4)), w = Random(n * k, 5);
  for (bool weighted : {false, true}) {
    Tensor cw = weighted ? Host(w, {n, k}) : Tensor();
    Tensor gw = weighted ? Gpu(w, {n, k}, DType::kF32) : Tensor();
    Tensor cg = Host(std::vector<float>(m * c), {m, c});
    ASSERT_TRUE(CpuMoe().GatherRows(kCpuCtx, cg, Host(x, {n, c}), HostI32(assign, {m}), k, cw).ok());
    Tensor gg = GpuZeros({m, c}, dt);
    ASSERT_TRUE(GpuMoe()
                    .GatherRows(GpuCtx(), gg, Gpu(x, {n, c}, dt), GpuI32(assign, {m}), k, gw)
                    .ok());
    EXPECT_TRUE(Close(Floats(gg), Floats(cg), TolFor(dt, false)));
    Tensor co = Host(std::vector<float>(n * c), {n, c});
    ASSERT_TRUE(CpuMoe().CombineRows(kCpuCtx, co, cg, HostI32(slots, {n, k}), cw, false).ok());
    Tensor go = GpuZeros({n, c}, dt);
    ASSERT_TRUE(GpuMoe().CombineRows(GpuCtx(), go, gg, GpuI32(slots, {n, k}), gw, false).ok());
    EXPECT_TRUE(Close(Floats(go), Floats(co), TolFor(dt, false)));
  }
  Tensor src = Host(RoundTo(dt, Random(m * c, 6)), {m, c});
  Tensor cd = Host(std::vector<float>(n * k), {n, k});
  ASSERT_TRUE(CpuMoe().RowDots(kCpuCtx, cd, Host(x, {n, c}), src, HostI32(slots, {n, k})).ok());
  Tensor gd = GpuZeros({n, k}, DType::kF32);
  ASSERT_TRUE(GpuMoe()
                  .RowDots(GpuCtx(), gd, Gpu(x, {n, c}, dt), Gpu(Floats(src), {m, c}, dt),
                           GpuI32(slots, {n, k}))
                  .ok());
  // f32 dot products of the same (bf16-exact) values on both sides.
  EXPECT_TRUE(Close(Floats(gd), Floats(cd), kF32ReduceTol));
}

TEST(MoeParityTest, RouterTopKAndBackwardF32) { RouterTopKAndBackward(DType::kF32); }
TEST(MoeParityTest, RouterTopKAndBackwardBf16) { RouterTopKAndBackward(DType::kBF16); }
TEST(MoeParityTest, GatherCombineAndDotsF32) { GatherCombineAndDots(DType::kF32); }
TEST(MoeParityTest, GatherCombineAndDotsBf16) { GatherCombineAndDots(DType::kBF16); }

// The kernel holds the gradients of at most kMaxRouterTopK choices: more
// must be an error, not a read past them.
TEST(MoeParityTest, RouterBackwardRejectsTooManyChoices) {
  const int64_t n = 4, e = kMaxRouterTopK + 2, k = kMaxRouterTopK + 1;
  Tensor gd = GpuZeros({n, e}, DType::kF32);
  const absl::Status st = GpuMoe().RouterTopKBackward(
      GpuCtx(), gd, GpuZeros({n, k}, DType::kF32), GpuZeros({n, e}, DType::kF32),
      GpuZeros({n}, DType::kF32), GpuI32(std::vector<int32_t>(n * k), {n, k}), Tensor(), 0.f,
      {.k = static_cast<int>(k)});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
}

}  // namespace
}  // namespace weft::cuda::testing
