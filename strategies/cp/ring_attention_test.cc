// Ring attention on cp ranks (threads with gloo groups) against causal
// attention over the whole sequence in one module, for GPT's attention and
// Llama's (grouped-query, rotary positions at the chunks' global places): each rank's output and
// input gradient equal the matching rows of the full ones, the parameter
// gradients summed over ranks equal the full ones, and the ring moved
// exactly the K/V blocks the schedule says.
#include "strategies/cp/ring_attention.h"

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "comm/testing/multiprocess.h"
#include "core/base/status_macros.h"
#include "core/nn/attention.h"
#include "core/nn/gqa_attention.h"
#include "core/nn/materialize.h"
#include "core/testing/grad_check.h"
#include "gtest/gtest.h"
#include "strategies/cp/zigzag.h"

namespace weft::cp {
namespace {

using ::weft::testing::RandomTensor;

std::unique_ptr<Module> Attention(bool llama) {
  if (!llama) return std::make_unique<CausalSelfAttention>(8, 2, 0.5f, 0.5f, 0.f);
  auto rope = *RopeTable::Create({.head_dim = 4, .max_positions = 64, .theta = 10000.0});
  return std::make_unique<GroupedQueryAttention>(
      GqaAttentionConfig{.channels = 8, .num_heads = 2, .num_kv_heads = 1, .head_dim = 4,
                         .init_std = 0.5f, .proj_init_std = 0.5f},
      rope);
}

// A root holding one attention layer under "attn", so names match.
class Holder : public Module {
 public:
  explicit Holder(bool llama = false) : Module("Holder") {
    RegisterSwappableModule("attn", Attention(llama));
  }
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override {
    return child("attn")->CallForward(ctx, x);
  }
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override {
    return child("attn")->CallBackward(ctx, dy);
  }
};

class RingAttentionTest : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(RingAttentionTest, MatchesFullAttention) {
  const auto [cp, llama] = GetParam();
  const int64_t b = 2, len = 3, t = 2 * cp * len, c = 8;
  auto results = comm::testing::RunRanks(
      comm::testing::RankMode::kThreads, cp,
      [&](const comm::testing::RankContext& rc) -> absl::Status {
        RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
        Tensor x = RandomTensor({b, t, c}, 11), dy = RandomTensor({b, t, c}, 12);
        Holder full(llama);
        WEFT_RETURN_IF_ERROR(MaterializeParameters(full, {.seed = 5}));
        WEFT_ASSIGN_OR_RETURN(Tensor y_full, full.CallForward(ctx, x));
        WEFT_ASSIGN_OR_RETURN(Tensor dx_full, full.CallBackward(ctx, dy));

        comm::ProcessGroupOptions ring_options, sum_options;
        ring_options.name = "ring";
        sum_options.name = "sum";
        WEFT_ASSIGN_OR_RETURN(auto ring_group, rc.NewGroup("gloo", ring_options));
        WEFT_ASSIGN_OR_RETURN(auto sum_group, rc.NewGroup("gloo", sum_options));
        auto ring = std::make_shared<Ring>(ring_group);
        Holder split(llama);
        WEFT_RETURN_IF_ERROR(MaterializeParameters(split, {.seed = 5}));
        WEFT_ASSIGN_OR_RETURN(int swapped, SwapInRingAttention(split, ring));
        if (swapped != 1) return absl::InternalError("expected one swapped layer");

        WEFT_ASSIGN_OR_RETURN(TokenChunks mine, ZigzagChunks(rc.rank, cp, t));
        ctx.sequence = mine;
        WEFT_ASSIGN_OR_RETURN(Tensor x_local, TakeChunks(ctx, x, mine));
        WEFT_ASSIGN_OR_RETURN(Tensor dy_local, TakeChunks(ctx, dy, mine));
        WEFT_ASSIGN_OR_RETURN(Tensor y, split.CallForward(ctx, x_local));
        WEFT_ASSIGN_OR_RETURN(Tensor want_y, TakeChunks(ctx, y_full, mine));
        WEFT_RETURN_IF_ERROR(testing::CheckNear(y, want_y, 1e-5, "output"));
        const int64_t forward_bytes = ring->bytes();
        WEFT_ASSIGN_OR_RETURN(Tensor dx, split.CallBackward(ctx, dy_local));
        WEFT_ASSIGN_OR_RETURN(Tensor want_dx, TakeChunks(ctx, dx_full, mine));
        WEFT_RETURN_IF_ERROR(testing::CheckNear(dx, want_dx, 1e-4, "input gradient"));

        std::vector<Parameter*> got = split.Parameters(), want = full.Parameters();
        if (got.size() != want.size() || got.size() != 4) {
          return absl::InternalError("parameter lists differ");
        }
        for (size_t i = 0; i < got.size(); ++i) {
          if (got[i]->name() != want[i]->name()) {
            return absl::InternalError(got[i]->name() + " vs " + want[i]->name());
          }
          WEFT_RETURN_IF_ERROR(sum_group->AllReduce(got[i]->grad)->Wait());
          WEFT_RETURN_IF_ERROR(
              testing::CheckNear(got[i]->grad, want[i]->grad, 1e-4, got[i]->name()));
        }
        // One K/V block (B, 2 len, 2C) f32 is sent and one received per
        // exchange: cp - 1 forward, cp - 1 + cp backward. (Llama's K/V
        // heads travel repeated for their query heads: 2C as well.)
        const int64_t block = b * 2 * len * 2 * c * 4;
        const int64_t want_forward = cp > 1 ? 2 * block * (cp - 1) : 0;
        const int64_t want_total = cp > 1 ? 2 * block * (3 * cp - 2) : 0;
        if (forward_bytes != want_forward || ring->bytes() != want_total) {
          return absl::InternalError("ring bytes forward " + std::to_string(forward_bytes) +
                                     " (want " + std::to_string(want_forward) + "), total " +
                                     std::to_string(ring->bytes()) + " (want " +
                                     std::to_string(want_total) + ")");
        }
        return absl::OkStatus();
      });
  const absl::Status ok = comm::testing::AllRanksOk(results);
  EXPECT_TRUE(ok.ok()) << ok;
}

INSTANTIATE_TEST_SUITE_P(RingSizes, RingAttentionTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4), ::testing::Bool()));

TEST(RingAttentionTest, RefusesAWholeSequenceWithoutChunks) {
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  // A one-rank ring needs no peers; the layer must still insist on chunks.
  auto results = comm::testing::RunRanks(
      comm::testing::RankMode::kThreads, 1,
      [&](const comm::testing::RankContext& rc) -> absl::Status {
        WEFT_ASSIGN_OR_RETURN(auto g, rc.NewGroup("gloo"));
        Holder h;
        WEFT_RETURN_IF_ERROR(MaterializeParameters(h, {.seed = 1}));
        WEFT_RETURN_IF_ERROR(SwapInRingAttention(h, std::make_shared<Ring>(g)).status());
        RunContext local = ctx;
        const absl::Status s = h.CallForward(local, RandomTensor({1, 4, 8}, 1)).status();
        if (s.code() != absl::StatusCode::kFailedPrecondition) {
          return absl::InternalError("expected FailedPrecondition, got " + s.ToString());
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(comm::testing::AllRanksOk(results).ok());
}

// A block of the chunks (what sp hands the layer) is fine only when qkv
// gathers it whole (a column-parallel qkv); a plain qkv would attend over
// half the queries, so the layer refuses and names both token counts.
TEST(RingAttentionTest, RefusesQkvOfPartOfTheChunks) {
  auto results = comm::testing::RunRanks(
      comm::testing::RankMode::kThreads, 1,
      [&](const comm::testing::RankContext& rc) -> absl::Status {
        WEFT_ASSIGN_OR_RETURN(auto g, rc.NewGroup("gloo"));
        Holder h;
        WEFT_RETURN_IF_ERROR(MaterializeParameters(h, {.seed = 1}));
        WEFT_RETURN_IF_ERROR(SwapInRingAttention(h, std::make_shared<Ring>(g)).status());
        RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
        WEFT_ASSIGN_OR_RETURN(ctx.sequence, ZigzagChunks(0, 1, 8));
        const absl::Status s = h.CallForward(ctx, RandomTensor({1, 4, 8}, 1)).status();
        const std::string m(s.message());
        if (s.code() != absl::StatusCode::kFailedPrecondition ||
            m.find("queries of 4 tokens") == std::string::npos ||
            m.find("holding 8 tokens") == std::string::npos) {
          return absl::InternalError("expected the token counts, got " + s.ToString());
        }
        return absl::OkStatus();
      });
  const absl::Status ok = comm::testing::AllRanksOk(results);
  EXPECT_TRUE(ok.ok()) << ok;
}

}  // namespace
}  // namespace weft::cp
