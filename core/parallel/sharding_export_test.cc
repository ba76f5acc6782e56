#include "core/parallel/sharding_export.h"

#include <vector>

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

}  // namespace
}  // namespace weft
