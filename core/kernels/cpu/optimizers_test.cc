#include <array>
#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "core/kernels/cpu/cpu_ops.h"
#include "core/testing/grad_check.h"

namespace weft::cpu {
namespace {

using ::weft::testing::FilledTensor;

const KernelContext kCtx{Device::Cpu()};

OptimSegment Segment(float w, float g, bool decay) {
  OptimSegment s;
  s.master = FilledTensor({1}, w);
  s.grad = FilledTensor({1}, g);
  s.exp_avg = FilledTensor({1}, 0);
  s.exp_avg_sq = FilledTensor({1}, 0);
  s.weight_decay = decay;
  return s;
}

// Two AdamW steps by hand, the PyTorch AdamW formula.
TEST(AdamWTest, MatchesHandComputedSteps) {
  CpuKernelOps ops;
  OptimSegment segs[] = {Segment(1.0f, 0.5f, true), Segment(1.0f, 0.5f, false)};
  AdamWHyper h{.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.01f};
  double w = 1.0, m = 0, v = 0, w_nodecay = 1.0;
  for (int step = 1; step <= 2; ++step) {
    h.step = step;
    ASSERT_TRUE(ops.AdamW(kCtx, segs, h).ok());
    m = 0.9 * m + 0.1 * 0.5;
    v = 0.99 * v + 0.01 * 0.25;
    const double upd = (m / (1 - std::pow(0.9, step))) / (std::sqrt(v / (1 - std::pow(0.99, step))) + 1e-8);
    w -= 0.1 * (upd + 0.01 * w);
    w_nodecay -= 0.1 * upd;
  }
  EXPECT_NEAR(segs[0].master.data<float>()[0], w, 1e-6);
  EXPECT_NEAR(segs[1].master.data<float>()[0], w_nodecay, 1e-6);
}

TEST(AdamWTest, ClipsFromDeviceNormAndRefreshesBf16Param) {
  CpuKernelOps ops;
  OptimSegment s = Segment(0.0f, 4.0f, false);
  s.param = *Tensor::Zeros({1}, DType::kBF16);
  AdamWHyper h{.lr = 1.0f, .beta1 = 0.0f, .beta2 = 0.0f, .eps = 0.0f, .weight_decay = 0.f};
  h.max_grad_norm = 1.0f;
  h.grad_norm_sq = FilledTensor({1}, 16.f);  // norm 4 -> coefficient ~1/4
  ASSERT_TRUE(ops.AdamW(kCtx, absl::MakeSpan(&s, 1), h).ok());
  // With beta = 0 the step is lr * g / |g| = 1 whatever the scale: sign only.
  EXPECT_NEAR(s.master.data<float>()[0], -1.0f, 1e-6);
  EXPECT_EQ(s.param.data<BFloat16>()[0].bits, FloatToBf16Bits(-1.0f));
  // The moments saw the clipped gradient 4 * 1/(4+1e-6) ~ 1.
  EXPECT_NEAR(s.exp_avg.data<float>()[0], 1.0f, 1e-5);
}

TEST(SgdTest, MomentumAndNesterov) {
  CpuKernelOps ops;
  OptimSegment s = Segment(1.0f, 1.0f, false);
  SgdHyper h{.lr = 0.1f, .momentum = 0.5f};
  ASSERT_TRUE(ops.Sgd(kCtx, absl::MakeSpan(&s, 1), h).ok());  // buf = 1, w = 0.9
  ASSERT_TRUE(ops.Sgd(kCtx, absl::MakeSpan(&s, 1), h).ok());  // buf = 1.5, w = 0.75
  EXPECT_NEAR(s.master.data<float>()[0], 0.75f, 1e-6);
  OptimSegment n = Segment(1.0f, 1.0f, false);
  h.nesterov = true;
  ASSERT_TRUE(ops.Sgd(kCtx, absl::MakeSpan(&n, 1), h).ok());  // buf = 1, step = 1.5
  EXPECT_NEAR(n.master.data<float>()[0], 0.85f, 1e-6);
}

// A replayed CUDA graph reads lr and the bias corrections from memory: the
// by-value fields are then ignored, and the update is bitwise the same.
TEST(AdamWTest, StepScalarsFromMemoryReplaceLrAndStep) {
  CpuKernelOps ops;
  OptimSegment a[] = {Segment(1.0f, 0.5f, true)}, b[] = {Segment(1.0f, 0.5f, true)};
  AdamWHyper by_value{.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f};
  AdamWHyper in_memory = by_value;
  in_memory.lr = -5.0f;
  in_memory.step = 0;
  for (int step = 1; step <= 3; ++step) {
    by_value.step = step;
    by_value.lr = 0.1f / step;
    const std::array<float, 3> k = AdamWStepScalars(by_value.lr, 0.9f, 0.99f, step);
    in_memory.step_scalars = *Tensor::FromVector<float>(k, {3});
    ASSERT_TRUE(ops.AdamW(kCtx, a, by_value).ok());
    ASSERT_TRUE(ops.AdamW(kCtx, b, in_memory).ok());
  }
  EXPECT_EQ(a[0].master.data<float>()[0], b[0].master.data<float>()[0]);
  EXPECT_EQ(a[0].exp_avg_sq.data<float>()[0], b[0].exp_avg_sq.data<float>()[0]);
  OptimSegment c = Segment(1.0f, 1.0f, false), d = Segment(1.0f, 1.0f, false);
  const SgdHyper sgd{.lr = 0.1f, .momentum = 0.5f};
  SgdHyper sgd_memory = sgd;
  sgd_memory.lr = 9.0f;
  sgd_memory.step_scalars = FilledTensor({1}, 0.1f);
  ASSERT_TRUE(ops.Sgd(kCtx, absl::MakeSpan(&c, 1), sgd).ok());
  ASSERT_TRUE(ops.Sgd(kCtx, absl::MakeSpan(&d, 1), sgd_memory).ok());
  EXPECT_EQ(c.master.data<float>()[0], d.master.data<float>()[0]);
  // The wrong count of values is an error naming what was expected.
  in_memory.step_scalars = FilledTensor({2}, 1.f);
  const absl::Status bad = ops.AdamW(kCtx, a, in_memory);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("3 f32 values"), std::string::npos) << bad;
}

TEST(AdamWTest, MismatchedSegmentIsAnError) {
  CpuKernelOps ops;
  OptimSegment s = Segment(1.0f, 1.0f, true);
  s.grad = FilledTensor({2}, 1.f);
  EXPECT_EQ(ops.AdamW(kCtx, absl::MakeSpan(&s, 1), AdamWHyper{}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace weft::cpu
