#include "core/parallel/sharding_export.h"

#include <vector>

#include "core/nn/parameter.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

HostPiece Piece(std::string name, Shape global, std::vector<int64_t> off, Shape box, int64_t b,
                int64_t e, std::vector<float> v, int replica = 0) {
  return {{std::move(name), std::move(global), std::move(off), std::move(box), b, e, replica, {}},
          std::move(v)};
}

// A 4x4 tensor split tp=2 along columns, each half then flat-sharded in two
// (fsdp over tp), plus a replicated copy of one range.
TEST(ShardingExportTest, ReassemblesBoxesAndFlatRanges) {
  std::vector<float> want(16);
  for (int i = 0; i < 16; ++i) want[i] = static_cast<float>(i);
  auto half = [&](int col0) {  // the 4x2 box at columns col0..col0+1, row-major
    std::vector<float> v;
    for (int r = 0; r < 4; ++r)
      for (int c = col0; c < col0 + 2; ++c) v.push_back(want[r * 4 + c]);
    return v;
  };
  std::vector<float> left = half(0), right = half(2);
  std::vector<HostPiece> pieces = {
      Piece("w", {4, 4}, {0, 0}, {4, 2}, 0, 3, {left.begin(), left.begin() + 3}),
      Piece("w", {4, 4}, {0, 0}, {4, 2}, 3, 8, {left.begin() + 3, left.end()}),
      Piece("w", {4, 4}, {0, 2}, {4, 2}, 0, 8, right),
      Piece("w", {4, 4}, {0, 2}, {4, 2}, 0, 8, right, /*replica=*/1),
  };
  auto full = Reassemble(pieces);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->at("w"), want);
}

TEST(ShardingExportTest, GapsOverlapsAndDisagreeingReplicasAreErrors) {
  std::vector<HostPiece> gap = {Piece("b", {4}, {0}, {4}, 0, 3, {1, 2, 3})};
  absl::Status s = Reassemble(gap).status();
  EXPECT_NE(s.message().find("b element 3 is on no rank"), std::string::npos) << s;

  std::vector<HostPiece> overlap = {Piece("b", {4}, {0}, {4}, 0, 3, {1, 2, 3}),
                                    Piece("b", {4}, {0}, {4}, 2, 4, {3, 4})};
  EXPECT_NE(Reassemble(overlap).status().message().find("held twice"), std::string::npos);

  std::vector<HostPiece> replicas = {Piece("b", {2}, {0}, {2}, 0, 2, {1, 2}),
                                     Piece("b", {2}, {0}, {2}, 0, 2, {1, 2.5f}, 1)};
  EXPECT_NE(Reassemble(replicas).status().message().find("replica 1 holds 2.5"),
            std::string::npos);
  EXPECT_TRUE(Reassemble(replicas, /*replica_tol=*/0.5).ok());

  std::vector<HostPiece> short_values = {Piece("b", {2}, {0}, {2}, 0, 2, {1})};
  EXPECT_FALSE(Reassemble(short_values).ok());
}

// The second tp block of a 5-row table in padded blocks of 3 rows holds rows
// 3 and 4 and a zero row; flat-sharded in two (fsdp), its second range
// [3, 6) has one element of the box and two of padding: the export names
// only box elements, with their values and state.
TEST(ShardingExportTest, PaddedRowsAreNoPieceOfTheTensor) {
  Parameter p("wte", {5, 2}, InitSpec::Zeros(), true);
  p.set_name("embed.wte");
  ASSERT_TRUE(p.SetPlacement(Placement().PaddedShard("tp", 1, 2)).ok());
  ASSERT_EQ(p.shape(), (Shape{3, 2}));
  p.value = *Tensor::FromFloats({6, 7, 8, 9, 0, 0}, {3, 2});
  p.grad = *Tensor::Zeros({3, 2}, DType::kF32);
  Tensor flat = p.value.View({6}), grad = p.grad.View({6});
  std::vector<OptimTarget> targets = {
      {.name = "a", .value = flat.Slice(0, 0, 3), .grad = grad.Slice(0, 0, 3), .param = &p},
      {.name = "b", .value = flat.Slice(0, 3, 6), .grad = grad.Slice(0, 3, 6), .param = &p,
       .param_offset = 3}};
  auto opt = Optimizer::Create({}, targets, Device::Cpu(), nullptr, nullptr);
  ASSERT_TRUE(opt.ok()) << opt.status();
  auto pieces = ExportState(**opt, {});
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  auto host = ToHost(*pieces);
  ASSERT_TRUE(host.ok()) << host.status();
  const std::vector<float> box_values = {6, 7, 8, 9};
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const HostPiece& h : *host) {
    EXPECT_EQ(h.info.box_shape, (Shape{2, 2})) << h.info.name;
    EXPECT_EQ(h.info.box_offsets, (std::vector<int64_t>{3, 0})) << h.info.name;
    EXPECT_EQ(static_cast<int64_t>(h.values.size()), h.info.end - h.info.begin);
    if (h.info.name == "embed.wte") {
      ranges.emplace_back(h.info.begin, h.info.end);
      EXPECT_EQ(h.values, std::vector<float>(box_values.begin() + h.info.begin,
                                             box_values.begin() + h.info.end));
    }
  }
  EXPECT_EQ(ranges, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 4}}));
}

}  // namespace
}  // namespace weft
