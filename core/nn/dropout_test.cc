// Dropout's random streams: a rank holding a box of a sharded region draws
// exactly that box of the single-process mask, and the replicated and
// sharded streams are independent.
#include "core/nn/dropout.h"

#include <vector>

#include "core/kernels/kernel_ops.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

Tensor Ones(Shape s) {
  Tensor t = *Tensor::Empty(s, DType::kF32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = 1.f;
  return t;
}

RunContext Ctx() {
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  ctx.dropout_seed = 123;
  return ctx;
}

std::vector<float> Mask(Dropout& d, const Tensor& x) {
  RunContext ctx = Ctx();
  return *d.CallForward(ctx, x)->ToFloats();
}

// A module named like a model's, so both runs hash the same path.
struct Host : Module {
  explicit Host(Dropout::Stream stream) : Module("Host") {
    d = RegisterModule("drop", std::make_unique<Dropout>(0.5f, stream));
  }
  absl::StatusOr<Tensor> Forward(RunContext&, const Tensor& x) override { return x; }
  absl::StatusOr<Tensor> Backward(RunContext&, const Tensor& dy) override { return dy; }
  Dropout* d;
};

TEST(DropoutTest, ShardedBoxesReproduceTheSingleProcessMask) {
  const Shape global = {2, 6, 4};  // (B, T, C); T split 3 ways (sequence parallel)
  Host whole(Dropout::Stream::kSharded);
  const std::vector<float> ref = Mask(*whole.d, Ones(global));
  int dropped = 0;
  for (float v : ref) dropped += v == 0.f;
  EXPECT_GT(dropped, 8);
  EXPECT_LT(dropped, 40);
  for (int r = 0; r < 3; ++r) {
    Host piece(Dropout::Stream::kReplicated);
    piece.d->SetShard({{0, 2 * r, 0}, {2, 2, 4}}, global);
    EXPECT_EQ(piece.d->stream(), Dropout::Stream::kSharded);
    const std::vector<float> got = Mask(*piece.d, Ones({2, 2, 4}));
    for (int b = 0; b < 2; ++b)
      for (int t = 0; t < 2; ++t)
        for (int c = 0; c < 4; ++c)
          ASSERT_EQ(got[(b * 2 + t) * 4 + c], ref[(b * 6 + 2 * r + t) * 4 + c])
              << "rank " << r << " at " << b << "," << t << "," << c;
  }
}

TEST(DropoutTest, StreamsAreIndependent) {
  Host replicated(Dropout::Stream::kReplicated), sharded(Dropout::Stream::kSharded);
  const Tensor x = Ones({64});
  EXPECT_NE(Mask(*replicated.d, x), Mask(*sharded.d, x));
  Host again(Dropout::Stream::kReplicated);
  EXPECT_EQ(Mask(*replicated.d, x), Mask(*again.d, x));
}

TEST(DropoutTest, ContiguousRunsOfABox) {
  std::vector<std::vector<int64_t>> runs;
  ForEachContiguousRun({{0, 1, 0}, {2, 2, 3}}, {2, 4, 3},
                       [&](int64_t l, int64_t g, int64_t n) { runs.push_back({l, g, n}); });
  // Whole rows of C merge with the T run; one run per batch element.
  EXPECT_EQ(runs, (std::vector<std::vector<int64_t>>{{0, 3, 6}, {6, 15, 6}}));
  runs.clear();
  ForEachContiguousRun({{0, 0}, {3, 5}}, {3, 5},
                       [&](int64_t l, int64_t g, int64_t n) { runs.push_back({l, g, n}); });
  EXPECT_EQ(runs, (std::vector<std::vector<int64_t>>{{0, 0, 15}}));
}

}  // namespace
}  // namespace weft
