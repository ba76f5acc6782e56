// The region ops on 2 gloo ranks (threads): exact values forward and
// backward, including the sequence all-gather / reduce-scatter pair.
#include "strategies/tp/region_ops.h"

#include <vector>

#include "comm/testing/multiprocess.h"
#include "gtest/gtest.h"

namespace weft::tp {
namespace {

// (2, 4, 2): value = 100 * rank + index.
Tensor RankTensor(int rank, Shape shape) {
  std::vector<float> v(NumElements(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 100.f * rank + static_cast<float>(i);
  return *Tensor::FromFloats(v, shape);
}

void RunOnTwoRanks(const std::function<absl::Status(TpComm&, RunContext&, int)>& body) {
  auto results = comm::testing::RunRanks(
      comm::testing::RankMode::kThreads, 2,
      [&](const comm::testing::RankContext& rc) -> absl::Status {
        auto group = rc.NewGroup("gloo", {.name = "tp"});
        if (!group.ok()) return group.status();
        TpComm tp{.group = *group};
        auto ctx = RunContext::Create(Device::Cpu(), DType::kF32);
        if (!ctx.ok()) return ctx.status();
        return body(tp, *ctx, rc.rank);
      });
  ASSERT_TRUE(comm::testing::AllRanksOk(results).ok()) << comm::testing::AllRanksOk(results);
}

absl::Status Expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

TEST(RegionOpsTest, SequenceGatherThenScatterRoundTrips) {
  RunOnTwoRanks([](TpComm& tp, RunContext& ctx, int rank) -> absl::Status {
    Tensor shard = RankTensor(rank, {2, 2, 3});  // (B, T/tp, C)
    auto whole = AllGatherAlong(tp, ctx, shard, 1);
    if (!whole.ok()) return whole.status();
    if (whole->shape() != Shape{2, 4, 3}) return absl::InternalError("gathered shape");
    std::vector<float> w = *whole->ToFloats();
    // Row (b, t): rank t / 2's element (b, t % 2).
    for (int b = 0; b < 2; ++b) {
      for (int t = 0; t < 4; ++t) {
        for (int c = 0; c < 3; ++c) {
          const float want = 100.f * (t / 2) + static_cast<float>((b * 2 + t % 2) * 3 + c);
          if (w[(b * 4 + t) * 3 + c] != want) return absl::InternalError("gathered value");
        }
      }
    }
    // Reduce-scatter of the gathered tensor: the sum over 2 ranks of my block.
    auto back = ReduceScatterAlong(tp, ctx, *whole, 1);
    if (!back.ok()) return back.status();
    std::vector<float> s = *back->ToFloats(), mine = *shard.ToFloats();
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != 2 * mine[i]) return absl::InternalError("reduce-scattered value");
    }
    return absl::OkStatus();
  });
}

TEST(RegionOpsTest, CopyToAndReduceFrom) {
  RunOnTwoRanks([](TpComm& tp, RunContext&, int rank) -> absl::Status {
    Tensor x = RankTensor(rank, {2, 4});
    // copy_to: identity forward, all-reduce backward.
    auto f = CopyToForward(tp, x);
    if (!f.ok() || f->raw_data() != x.raw_data()) return absl::InternalError("copy_to fwd");
    Tensor dy = RankTensor(rank, {2, 4});
    auto b = CopyToBackward(tp, dy);
    if (!b.ok()) return b.status();
    std::vector<float> sum = *b->ToFloats();
    for (int i = 0; i < 8; ++i) {
      if (sum[i] != 100.f + 2.f * i) return absl::InternalError("copy_to bwd");
    }
    // reduce_from: all-reduce forward, identity backward.
    Tensor y = RankTensor(rank, {2, 4});
    auto r = ReduceFromForward(tp, y);
    if (!r.ok() || (*r->ToFloats())[3] != 106.f) return absl::InternalError("reduce_from fwd");
    auto rb = ReduceFromBackward(tp, dy);
    if (!rb.ok() || rb->raw_data() != dy.raw_data()) return absl::InternalError("reduce_from bwd");
    return absl::OkStatus();
  });
}

TEST(RegionOpsTest, SequenceShardMustDivide) {
  RunOnTwoRanks([](TpComm& tp, RunContext& ctx, int rank) -> absl::Status {
    absl::StatusOr<Tensor> r = ReduceScatterAlong(tp, ctx, RankTensor(rank, {1, 3, 2}), 1);
    return Expect(!r.ok() && r.status().message().find("seq_len must be a multiple of tp") !=
                                 std::string::npos,
                  "indivisible sequence accepted");
  });
}

// The startup check of seq_len against cp x tp sequence shards names lengths
// that also split into 2 x cp zigzag chunks.
TEST(RegionOpsTest, CheckSequenceShardsNamesLengthsThatWork) {
  EXPECT_TRUE(CheckSequenceShards(16, 1, 2).ok());
  EXPECT_TRUE(CheckSequenceShards(256, 2, 4).ok());
  const absl::Status sp = CheckSequenceShards(15, 1, 2);
  EXPECT_NE(sp.message().find("seq_len must be a multiple of tp"), std::string::npos) << sp;
  EXPECT_NE(sp.message().find("use --seq_len=14 or 16"), std::string::npos) << sp;
  const absl::Status cp_sp = CheckSequenceShards(252, 2, 4);
  EXPECT_NE(cp_sp.message().find("each cp rank holds 126 tokens"), std::string::npos) << cp_sp;
  EXPECT_NE(cp_sp.message().find("use --seq_len=248 or 256"), std::string::npos) << cp_sp;
  // lcm(cp x tp = 6, 2 x cp = 4) = 12: nothing below 10 works.
  const absl::Status small = CheckSequenceShards(10, 2, 3);
  EXPECT_NE(small.message().find("use --seq_len=12 (divisible by both 6"), std::string::npos)
      << small;
}

}  // namespace
}  // namespace weft::tp
