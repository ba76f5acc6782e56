// CPU-vs-CUDA parity for the multi-tensor AdamW and SGD: more segments than
// one launch holds (64), empty segments, f32 and bf16 gradients, bf16 / f32 /
// no parameter copies, weight decay on some segments only, and clipping
// computed on the device. Master weights and moments: f32 tolerance 1e-5
// over three steps. The bf16 parameter copy must equal the master weight
// rounded to nearest even, bit for bit.
#include <cmath>

#include "core/kernels/cuda/parity_util.h"
#include "gtest/gtest.h"

namespace weft::cuda::testing {
namespace {

struct SegmentData {
  int64_t n;
  DType grad_dtype;
  DType param_dtype;  // kF32, kBF16, or kI32 meaning "no parameter copy"
  bool decay;
  std::vector<float> master, grad;
};

std::vector<SegmentData> MakeSegments(int count) {
  std::vector<SegmentData> segs;
  for (int i = 0; i < count; ++i) {
    SegmentData s;
    s.n = i % 9 == 4 ? 0 : (i * 1237) % 9000 + 1;
    s.grad_dtype = i % 2 ? DType::kBF16 : DType::kF32;
    s.param_dtype = i % 3 == 0 ? DType::kBF16 : i % 3 == 1 ? DType::kF32 : DType::kI32;
    s.decay = i % 4 != 0;
    s.master = Random(s.n, 1000 + i);
    s.grad = RoundTo(s.grad_dtype, Random(s.n, 2000 + i, 0.5f));
    segs.push_back(std::move(s));
  }
  return segs;
}

struct State {
  std::vector<OptimSegment> cpu, gpu;
};

State MakeState(const std::vector<SegmentData>& segs, bool adam, bool gpu_momentum) {
  State st;
  for (const SegmentData& s : segs) {
    const std::vector<float> zeros(s.n, 0.0f);
    OptimSegment c{.master = Host(s.master, {s.n}),
                   .grad = Host(s.grad, {s.n}),
                   .exp_avg = Host(zeros, {s.n}),
                   .weight_decay = s.decay};
    OptimSegment g{.master = Gpu(s.master, {s.n}, DType::kF32),
                   .grad = Gpu(s.grad, {s.n}, s.grad_dtype),
                   .weight_decay = s.decay};
    if (gpu_momentum) g.exp_avg = GpuZeros({s.n}, DType::kF32);
    if (adam) {
      c.exp_avg_sq = Host(zeros, {s.n});
      g.exp_avg_sq = GpuZeros({s.n}, DType::kF32);
    }
    if (s.param_dtype != DType::kI32) {
      c.param = Host(zeros, {s.n});
      g.param = GpuZeros({s.n}, s.param_dtype);
    }
    st.cpu.push_back(std::move(c));
    st.gpu.push_back(std::move(g));
  }
  return st;
}

float NormSq(const std::vector<SegmentData>& segs) {
  double s = 0;
  for (const SegmentData& seg : segs) {
    for (float g : seg.grad) s += double(g) * g;
  }
  return static_cast<float>(s);
}

void CompareState(const State& st, const std::vector<SegmentData>& segs, bool adam) {
  for (size_t i = 0; i < segs.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "segment " << i << " n=" << segs[i].n);
    const auto master = Floats(st.gpu[i].master);
    EXPECT_TRUE(Close(master, Floats(st.cpu[i].master), kF32Tol)) << "master";
    if (st.gpu[i].exp_avg.defined()) {
      EXPECT_TRUE(Close(Floats(st.gpu[i].exp_avg), Floats(st.cpu[i].exp_avg), kF32Tol));
    }
    if (adam) {
      EXPECT_TRUE(Close(Floats(st.gpu[i].exp_avg_sq), Floats(st.cpu[i].exp_avg_sq), kF32Tol));
    }
    if (st.gpu[i].param.defined()) {
      EXPECT_EQ(Floats(st.gpu[i].param), RoundTo(st.gpu[i].param.dtype(), master))
          << "param copy is not the rounded master";
    }
  }
}

TEST(AdamWParityTest, ThreeStepsWithClippingAndMixedSegments) {
  const std::vector<SegmentData> segs = MakeSegments(70);
  State st = MakeState(segs, /*adam=*/true, /*gpu_momentum=*/true);
  const float norm_sq = NormSq(segs);
  AdamWHyper h;
  h.lr = 1e-2f;
  h.weight_decay = 0.1f;
  h.grad_scale = 0.5f;
  h.max_grad_norm = 0.25f * std::sqrt(norm_sq);  // clip to a quarter
  for (int step = 1; step <= 3; ++step) {
    h.step = step;
    h.grad_norm_sq = Host({norm_sq}, {1});
    ASSERT_TRUE(CpuOps().AdamW(kCpuCtx, absl::MakeSpan(st.cpu), h).ok());
    h.grad_norm_sq = Gpu({norm_sq}, {1}, DType::kF32);
    const absl::Status s = GpuOps().AdamW(GpuCtx(), absl::MakeSpan(st.gpu), h);
    ASSERT_TRUE(s.ok()) << s;
  }
  CompareState(st, segs, true);
}

// The kernel takes 4 elements per thread when every pointer is aligned and
// falls back per element otherwise: views one element into their buffers
// take the fallback, and must give the same numbers.
TEST(AdamWParityTest, UnalignedViewsMatchTheCpu) {
  const std::vector<SegmentData> segs = MakeSegments(12);
  State st = MakeState(segs, /*adam=*/true, /*gpu_momentum=*/true);
  auto shifted = [](const Tensor& t) {
    if (!t.defined() || t.numel() == 0) return t;
    const std::vector<float> v = Floats(t);
    std::vector<float> padded(v.size() + 1, 0.0f);
    std::copy(v.begin(), v.end(), padded.begin() + 1);
    return Gpu(padded, {static_cast<int64_t>(padded.size())}, t.dtype())
        .Slice(0, 1, static_cast<int64_t>(padded.size()));
  };
  for (OptimSegment& g : st.gpu) {
    g.master = shifted(g.master);
    g.grad = shifted(g.grad);
    g.exp_avg = shifted(g.exp_avg);
    g.exp_avg_sq = shifted(g.exp_avg_sq);
    g.param = shifted(g.param);
  }
  AdamWHyper h;
  h.lr = 1e-2f;
  h.weight_decay = 0.1f;
  for (int step = 1; step <= 2; ++step) {
    h.step = step;
    ASSERT_TRUE(CpuOps().AdamW(kCpuCtx, absl::MakeSpan(st.cpu), h).ok());
    const absl::Status s = GpuOps().AdamW(GpuCtx(), absl::MakeSpan(st.gpu), h);
    ASSERT_TRUE(s.ok()) << s;
  }
  CompareState(st, segs, true);
}

TEST(AdamWParityTest, NoClipping) {
  const std::vector<SegmentData> segs = MakeSegments(5);
  State st = MakeState(segs, true, true);
  AdamWHyper h;  // max_grad_norm = 0: grad_norm_sq is not read
  ASSERT_TRUE(CpuOps().AdamW(kCpuCtx, absl::MakeSpan(st.cpu), h).ok());
  ASSERT_TRUE(GpuOps().AdamW(GpuCtx(), absl::MakeSpan(st.gpu), h).ok());
  CompareState(st, segs, true);
}

TEST(SgdParityTest, MomentumNesterovAndPlain) {
  for (bool nesterov : {false, true}) {
    for (float momentum : {0.0f, 0.9f}) {
      SCOPED_TRACE(::testing::Message() << "nesterov=" << nesterov << " momentum=" << momentum);
      const std::vector<SegmentData> segs = MakeSegments(67);
      // Without momentum the GPU runs with no buffer at all.
      State st = MakeState(segs, false, /*gpu_momentum=*/momentum != 0.0f);
      const float norm_sq = NormSq(segs);
      SgdHyper h;
      h.lr = 0.05f;
      h.momentum = momentum;
      h.nesterov = nesterov;
      h.weight_decay = 0.01f;
      h.grad_scale = 2.0f;
      h.max_grad_norm = 0.5f * std::sqrt(norm_sq);
      for (int step = 0; step < 3; ++step) {
        h.grad_norm_sq = Host({norm_sq}, {1});
        ASSERT_TRUE(CpuOps().Sgd(kCpuCtx, absl::MakeSpan(st.cpu), h).ok());
        h.grad_norm_sq = Gpu({norm_sq}, {1}, DType::kF32);
        const absl::Status s = GpuOps().Sgd(GpuCtx(), absl::MakeSpan(st.gpu), h);
        ASSERT_TRUE(s.ok()) << s;
      }
      CompareState(st, segs, false);
    }
  }
}

TEST(AdamWParityTest, MissingSecondMomentIsAnError) {
  OptimSegment g{.master = GpuZeros({4}, DType::kF32),
                 .grad = GpuZeros({4}, DType::kF32),
                 .exp_avg = GpuZeros({4}, DType::kF32)};
  std::vector<OptimSegment> segs{g};
  EXPECT_FALSE(GpuOps().AdamW(GpuCtx(), absl::MakeSpan(segs), AdamWHyper{}).ok());
}

}  // namespace
}  // namespace weft::cuda::testing
