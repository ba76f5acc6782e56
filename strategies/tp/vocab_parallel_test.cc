// The vocabulary-parallel cross-entropy on 2 gloo ranks (threads) equals the
// single-process fused kernel: the same losses on every rank and, on each
// rank, the gradient columns it holds (padding and ignored rows included).
#include "strategies/tp/vocab_parallel.h"

#include <cmath>
#include <vector>

#include "comm/testing/multiprocess.h"
#include "core/nn/loss.h"
#include "gtest/gtest.h"

namespace weft::tp {
namespace {

constexpr int64_t kRows = 6, kPadded = 8, kVocab = 7;

std::vector<float> Logits() {
  std::vector<float> v(kRows * kPadded);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.7f * static_cast<float>(i)) * 3.f;
  return v;
}

const std::vector<int32_t> kTargets = {0, 6, 3, -1, 4, 1};  // -1: ignored

TEST(VocabParallelCrossEntropyTest, MatchesTheFusedKernelOnTwoRanks) {
  auto ctx = RunContext::Create(Device::Cpu(), DType::kF32);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  Tensor ref_logits = *Tensor::FromFloats(Logits(), {kRows, kPadded});
  Tensor targets = *Tensor::FromVector<int32_t>(kTargets, {kRows});
  CrossEntropyLoss reference(kVocab);
  auto ref_losses = reference.ComputeLoss(*ctx, ref_logits, targets, 0.5f);
  ASSERT_TRUE(ref_losses.ok()) << ref_losses.status();
  const std::vector<float> want_loss = *ref_losses->ToFloats();
  const std::vector<float> want_grad = *ref_logits.ToFloats();

  auto results = comm::testing::RunRanks(
      comm::testing::RankMode::kThreads, 2,
      [&](const comm::testing::RankContext& rc) -> absl::Status {
        auto group = rc.NewGroup("gloo", {.name = "tp"});
        if (!group.ok()) return group.status();
        auto rctx = RunContext::Create(Device::Cpu(), DType::kF32);
        if (!rctx.ok()) return rctx.status();
        VocabParallelCrossEntropy loss(kVocab, kPadded, TpComm{.group = *group});
        const int64_t w = kPadded / 2, begin = rc.rank * w;
        std::vector<float> all = Logits(), mine;
        for (int64_t r = 0; r < kRows; ++r) {
          mine.insert(mine.end(), all.begin() + r * kPadded + begin,
                      all.begin() + r * kPadded + begin + w);
        }
        Tensor local = *Tensor::FromFloats(mine, {kRows, w});
        auto losses = loss.ComputeLoss(*rctx, local, targets, 0.5f);
        if (!losses.ok()) return losses.status();
        std::vector<float> got = *losses->ToFloats();
        for (int64_t r = 0; r < kRows; ++r) {
          if (std::fabs(got[r] - want_loss[r]) > 1e-5f) {
            return absl::InternalError(absl::StrCat("loss row ", r, ": ", got[r], " vs ",
                                                    want_loss[r]));
          }
        }
        auto grad = loss.Backward(*rctx, Tensor());
        if (!grad.ok()) return grad.status();
        std::vector<float> g = *grad->ToFloats();
        for (int64_t r = 0; r < kRows; ++r) {
          for (int64_t j = 0; j < w; ++j) {
            const float want = want_grad[r * kPadded + begin + j];
            if (std::fabs(g[r * w + j] - want) > 1e-6f) {
              return absl::InternalError(absl::StrCat("grad (", r, ", ", begin + j, "): ",
                                                      g[r * w + j], " vs ", want));
            }
          }
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(comm::testing::AllRanksOk(results).ok()) << comm::testing::AllRanksOk(results);
}

}  // namespace
}  // namespace weft::tp
