// MoE routing under cp: the zigzag blocks' choices land in global token
// order, and a MoeLayer on cp ranks (threads with gloo groups) that routes
// through CpRoutingExchange takes one process's decisions over the whole
// sequences: with a capacity that drops choices, each rank's output and
// input gradient equal the matching rows of the one-process layer's, the
// parameter gradients (balance and z-loss included) sum over ranks to its
// gradients, and the statistics (routed, dropped, balance loss, z-loss) are
// its numbers on every rank. The exchange receives the bytes its header
// says.
#include "strategies/cp/cp_routing_exchange.h"

#include <cmath>
#include <string>
#include <vector>

#include "comm/testing/multiprocess.h"
#include "core/base/status_macros.h"
#include "core/nn/materialize.h"
#include "core/nn/moe.h"
#include "core/testing/grad_check.h"
#include "gtest/gtest.h"
#include "strategies/cp/zigzag.h"

namespace weft::cp {
namespace {

using ::weft::testing::RandomTensor;

TEST(CpRoutingOrderTest, ZigzagBlocksLandInGlobalOrder) {
  // cp 2, chunks of 1 token, 2 samples, k 2: rank 0 holds positions 0 and
  // 3, rank 1 positions 1 and 2 of each 4-token sample.
  EXPECT_EQ(ZigzagTokenIndex(0, 2, 1, 2), (std::vector<int64_t>{0, 3, 4, 7}));
  EXPECT_EQ(ZigzagTokenIndex(1, 2, 1, 2), (std::vector<int64_t>{1, 2, 5, 6}));
  // Choice value = 10 * global token + j.
  const std::vector<int32_t> gathered = {0,  1,  30, 31, 40, 41, 70, 71,   // rank 0
                                         10, 11, 20, 21, 50, 51, 60, 61};  // rank 1
  std::vector<int32_t> want;
  for (int t = 0; t < 8; ++t) {
    want.push_back(10 * t);
    want.push_back(10 * t + 1);
  }
  EXPECT_EQ(OrderZigzagChoices(gathered, 2, 1, 2, 2), want);
}

absl::Status NearValue(double got, double want, double tol, const std::string& what) {
  if (std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want))) return absl::OkStatus();
  return absl::InternalError(what + ": " + std::to_string(got) + " vs " + std::to_string(want));
}

absl::Status Materialize(Module& m) {
  WEFT_RETURN_IF_ERROR(MaterializeParameters(m, {.seed = 7}));
  // Larger router weights than the init: confident, unbalanced routing.
  for (Parameter* p : m.Parameters()) {
    if (p->init().kind == InitSpec::Kind::kNormal) {
      WEFT_RETURN_IF_ERROR(p->value.CopyFrom(RandomTensor(p->shape(), 11 + p->numel(), 0.5f)));
    }
  }
  return absl::OkStatus();
}

struct Case {
  int cp;
  int top_k;
  double capacity_factor;
  int routing_groups;
};

class CpRoutingExchangeTest : public ::testing::TestWithParam<Case> {};

TEST_P(CpRoutingExchangeTest, MatchesOneProcessLayer) {
  const Case c = GetParam();
  const int64_t b = 2, len = 3, t = 2 * c.cp * len, ch = 6;
  const MoeConfig config{.channels = ch, .hidden = 8, .num_experts = 4, .top_k = c.top_k,
                         .capacity_factor = c.capacity_factor, .aux_loss_coef = 0.5f,
                         .z_loss_coef = 0.1f, .routing_groups = c.routing_groups};
  auto results = comm::testing::RunRanks(
      comm::testing::RankMode::kThreads, c.cp,
      [&](const comm::testing::RankContext& rc) -> absl::Status {
        RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
        Tensor x = RandomTensor({b, t, ch}, 21), dy = RandomTensor({b, t, ch}, 22);
        MoeLayer full(config);
        WEFT_RETURN_IF_ERROR(Materialize(full));
        WEFT_ASSIGN_OR_RETURN(Tensor y_full, full.CallForward(ctx, x));
        WEFT_ASSIGN_OR_RETURN(Tensor dx_full, full.CallBackward(ctx, dy));
        const MoeStats want = full.TakeStats();
        if (c.capacity_factor > 0 && want.dropped == 0) {
          return absl::InternalError("the capacity case must drop choices");
        }

        comm::ProcessGroupOptions cp_options, sum_options;
        cp_options.name = "cp";
        sum_options.name = "sum";
        WEFT_ASSIGN_OR_RETURN(auto cp_group, rc.NewGroup("gloo", cp_options));
        WEFT_ASSIGN_OR_RETURN(auto sum_group, rc.NewGroup("gloo", sum_options));
        auto exchange = std::make_shared<CpRoutingExchange>(cp_group);
        MoeLayer split(config);
        WEFT_RETURN_IF_ERROR(Materialize(split));
        split.set_routing_exchange(exchange);
        WEFT_ASSIGN_OR_RETURN(TokenChunks mine, ZigzagChunks(rc.rank, c.cp, t));
        ctx.sequence = mine;
        WEFT_ASSIGN_OR_RETURN(Tensor x_local, TakeChunks(ctx, x, mine));
        WEFT_ASSIGN_OR_RETURN(Tensor dy_local, TakeChunks(ctx, dy, mine));
        WEFT_ASSIGN_OR_RETURN(Tensor y, split.CallForward(ctx, x_local));
        WEFT_ASSIGN_OR_RETURN(Tensor want_y, TakeChunks(ctx, y_full, mine));
        WEFT_RETURN_IF_ERROR(testing::CheckNear(y, want_y, 1e-5, "output"));
        WEFT_ASSIGN_OR_RETURN(Tensor dx, split.CallBackward(ctx, dy_local));
        WEFT_ASSIGN_OR_RETURN(Tensor want_dx, TakeChunks(ctx, dx_full, mine));
        WEFT_RETURN_IF_ERROR(testing::CheckNear(dx, want_dx, 1e-4, "input gradient"));
        std::vector<Parameter*> got_p = split.Parameters(), want_p = full.Parameters();
        for (size_t i = 0; i < got_p.size(); ++i) {
          WEFT_RETURN_IF_ERROR(sum_group->AllReduce(got_p[i]->grad)->Wait());
          WEFT_RETURN_IF_ERROR(
              testing::CheckNear(got_p[i]->grad, want_p[i]->grad, 1e-4, got_p[i]->name()));
        }

        const MoeStats got = split.TakeStats();
        if (got.routed != want.routed || got.dropped != want.dropped ||
            got.choices != want.choices) {
          return absl::InternalError("routed/dropped/choices differ from one process: dropped " +
                                     std::to_string(got.dropped) + " vs " +
                                     std::to_string(want.dropped));
        }
        WEFT_RETURN_IF_ERROR(NearValue(got.aux_loss, want.aux_loss, 1e-9, "aux_loss"));
        WEFT_RETURN_IF_ERROR(NearValue(got.z_loss, want.z_loss, 1e-9, "z_loss"));
        // One forward: the choices (B * 2 len tokens x k int32) and the
        // sums (groups x E + 1 doubles) from each other rank.
        const int64_t bytes = (c.cp - 1) * (b * 2 * len * c.top_k * 4 +
                                            (c.routing_groups * 4 + 1) * 8);
        if (exchange->bytes() != bytes) {
          return absl::InternalError("exchange bytes " + std::to_string(exchange->bytes()) +
                                     ", want " + std::to_string(bytes));
        }
        return absl::OkStatus();
      });
  const absl::Status ok = comm::testing::AllRanksOk(results);
  EXPECT_TRUE(ok.ok()) << ok;
}

INSTANTIATE_TEST_SUITE_P(Cases, CpRoutingExchangeTest,
                         ::testing::Values(Case{2, 2, 0.0, 1}, Case{2, 2, 0.5, 1},
                                           Case{4, 1, 0.75, 1}, Case{2, 2, 0.5, 2},
                                           Case{3, 2, 0.6, 2}));

TEST(CpRoutingExchangeTest, RefusesTokensOutsideTheZigzagChunks) {
  auto results = comm::testing::RunRanks(
      comm::testing::RankMode::kThreads, 1,
      [&](const comm::testing::RankContext& rc) -> absl::Status {
        WEFT_ASSIGN_OR_RETURN(auto g, rc.NewGroup("gloo"));
        MoeLayer layer({.channels = 6, .hidden = 8, .num_experts = 4, .top_k = 2});
        WEFT_RETURN_IF_ERROR(Materialize(layer));
        layer.set_routing_exchange(std::make_shared<CpRoutingExchange>(g));
        RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
        // Half of each chunk (a sequence-parallel block): refused by name.
        WEFT_ASSIGN_OR_RETURN(ctx.sequence, ZigzagChunks(0, 1, 8));
        absl::Status s = layer.CallForward(ctx, RandomTensor({1, 4, 6}, 1)).status();
        if (s.code() != absl::StatusCode::kFailedPrecondition ||
            std::string(s.message()).find("zigzag chunks") == std::string::npos) {
          return absl::InternalError("expected the chunk error, got " + s.ToString());
        }
        return absl::OkStatus();
      });
  const absl::Status ok = comm::testing::AllRanksOk(results);
  EXPECT_TRUE(ok.ok()) << ok;
}

}  // namespace
}  // namespace weft::cp
