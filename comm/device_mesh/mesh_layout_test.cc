#include "comm/device_mesh/mesh_layout.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

using Ranks = std::vector<int>;

TEST(MeshLayoutTest, RowMajorWithTheLastAxisInnermost) {
  auto mesh = MeshLayout::Create({{"dp", 2}, {"tp", 2}}, 4);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->Coordinates(0), (Ranks{0, 0}));
  EXPECT_EQ(mesh->Coordinates(1), (Ranks{0, 1}));
  EXPECT_EQ(mesh->Coordinates(2), (Ranks{1, 0}));
  EXPECT_EQ(mesh->RankAt({1, 1}), 3);
  // tp groups are adjacent ranks; dp groups stride over them.
  EXPECT_EQ(*mesh->GroupRanks(2, {"tp"}), (Ranks{2, 3}));
  EXPECT_EQ(*mesh->GroupRanks(2, {"dp"}), (Ranks{0, 2}));
  EXPECT_EQ(*mesh->GroupRanks(3, {"dp"}), (Ranks{1, 3}));
  EXPECT_EQ(*mesh->GroupIndex(3, {"dp"}), 1);
  EXPECT_EQ(*mesh->GroupIndex(3, {"tp"}), 1);
  EXPECT_EQ(*mesh->GroupRanks(1, {"tp", "dp"}), (Ranks{0, 1, 2, 3}));
  EXPECT_EQ(mesh->ToString(), "[dp=2, tp=2]");
}

TEST(MeshLayoutTest, FlattenedAxesOfA3dMesh) {
  // pp=2 x dp_replicate=2 x dp_shard=3 x tp=2 = 24 ranks.
  auto mesh = MeshLayout::Create({{"pp", 2}, {"dp_replicate", 2}, {"dp_shard", 3}, {"tp", 2}}, 24);
  ASSERT_TRUE(mesh.ok());
  const int rank = 17;  // coordinates (1, 0, 2, 1)
  EXPECT_EQ(mesh->Coordinates(rank), (Ranks{1, 0, 2, 1}));
  EXPECT_EQ(*mesh->GroupRanks(rank, {"dp_shard"}), (Ranks{13, 15, 17}));
  // The order of the requested axes does not matter; mesh order does.
  const Ranks dp = {13, 15, 17, 19, 21, 23};
  EXPECT_EQ(*mesh->GroupRanks(rank, {"dp_replicate", "dp_shard"}), dp);
  EXPECT_EQ(*mesh->GroupRanks(rank, {"dp_shard", "dp_replicate"}), dp);
  EXPECT_EQ(*mesh->GroupRanks(rank, {"pp"}), (Ranks{5, 17}));
  EXPECT_EQ(*mesh->GroupIndex(rank, {"dp_replicate", "dp_shard"}), 3);  // (pp=1, tp=1)
  EXPECT_EQ(*mesh->CanonicalAxes({"tp", "pp"}), (std::vector<std::string>{"pp", "tp"}));
  // Every group index along an axis set is hit exactly group_size times.
  std::vector<int> hits(4, 0);
  for (int r = 0; r < 24; ++r) ++hits[*mesh->GroupIndex(r, {"dp_replicate", "dp_shard"})];
  EXPECT_EQ(hits, (Ranks{6, 6, 6, 6}));
}

TEST(MeshLayoutTest, ValidationErrorsCarryTheNumbers) {
  auto wrong = MeshLayout::Create({{"dp", 2}, {"tp", 3}}, 8);
  ASSERT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(wrong.status().message(), "[dp=2, tp=3] has 6 ranks"))
      << wrong.status();
  EXPECT_TRUE(absl::StrContains(wrong.status().message(), "world size is 8")) << wrong.status();
  EXPECT_FALSE(MeshLayout::Create({{"dp", 0}}, 0).ok());
  EXPECT_FALSE(MeshLayout::Create({{"dp", 2}, {"dp", 2}}, 4).ok());
  EXPECT_FALSE(MeshLayout::Create({{"Data Parallel", 2}}, 2).ok());
  EXPECT_FALSE(MeshLayout::Create({}, 1).ok());
  auto mesh = MeshLayout::Create({{"dp", 4}}, 4);
  EXPECT_EQ(mesh->AxisSize("tp").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(mesh->AxisSize("tp").status().message(), "one of: dp"));
  EXPECT_FALSE(mesh->GroupRanks(0, {"dp", "dp"}).ok());
  EXPECT_FALSE(mesh->GroupRanks(0, {}).ok());
}

}  // namespace
}  // namespace weft::comm
