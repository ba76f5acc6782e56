#include "comm/device_mesh/training_mesh.h"

#include "gtest/gtest.h"

namespace weft::comm {
namespace {

bool Has(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

TEST(TrainingMeshTest, RestAxisAndCoordinates) {
  // world 16 = pp 2 x dp_shard (rest) 2 x tp 4... with dp_replicate 1, cp 1.
  auto m = TrainingMesh::Create({.pp = 2, .dp_shard = 0, .tp = 4}, 16);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->layout().ToString(), "[pp=2, dp_replicate=1, dp_shard=2, cp=1, tp=4]");
  // rank 13 = pp 1, dp_shard 1, tp 1.
  EXPECT_EQ(m->layout().Coordinates(13), (std::vector<int>{1, 0, 1, 0, 1}));
  EXPECT_EQ(m->Coordinate(13, "tp"), 1);
}

TEST(TrainingMeshTest, TpGroupsAreAdjacentRanks) {
  auto m = *TrainingMesh::Create({.dp_shard = 0, .tp = 2}, 8);
  EXPECT_EQ(*m.layout().GroupRanks(5, std::vector<std::string>{"tp"}),
            (std::vector<int>{4, 5}));
  EXPECT_EQ(*m.layout().GroupRanks(5, std::vector<std::string>{"dp_shard"}),
            (std::vector<int>{1, 3, 5, 7}));
}

TEST(TrainingMeshTest, DataParallelRankComesFromCoordinates) {
  // [pp=1, dp_replicate=2, dp_shard=2, cp=1, tp=2]
  auto m = *TrainingMesh::Create({.dp_replicate = 2, .dp_shard = 2, .tp = 2}, 8);
  EXPECT_EQ(m.DataParallelSize(), 4);
  // tp neighbours share the dp rank (they read the same samples).
  const std::vector<int> expected = {0, 0, 1, 1, 2, 2, 3, 3};
  for (int r = 0; r < 8; ++r) EXPECT_EQ(m.DataParallelRank(r), expected[r]) << r;
  // cp ranks too.
  auto c = *TrainingMesh::Create({.dp_shard = 2, .cp = 2}, 4);
  EXPECT_EQ(c.DataParallelRank(1), 0);
  EXPECT_EQ(c.DataParallelRank(2), 1);
  EXPECT_EQ(c.DataParallelSize(), 2);
}

TEST(TrainingMeshTest, ExpertGroupsAreCarvedFromShardTimesCp) {
  // dp_replicate=2, dp_shard=4, ep=2: f = dp_shard coordinate.
  auto m = *TrainingMesh::Create({.dp_replicate = 2, .dp_shard = 4, .ep = 2}, 8);
  EXPECT_EQ(m.ExpertParallelRanks(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(m.ExpertParallelRanks(3), (std::vector<int>{2, 3}));
  EXPECT_EQ(m.ExpertParallelRanks(6), (std::vector<int>{6, 7}));
  // Same experts: same position inside the ep block, every replica.
  EXPECT_EQ(m.ExpertDataParallelRanks(0), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(m.ExpertDataParallelRanks(7), (std::vector<int>{1, 3, 5, 7}));
  // ep spans cp too: dp_shard=2 x cp=2, ep=4 is one block.
  auto c = *TrainingMesh::Create({.dp_shard = 2, .cp = 2, .ep = 4}, 4);
  EXPECT_EQ(c.ExpertParallelRanks(2), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(c.ExpertDataParallelRanks(2), (std::vector<int>{2}));
}

TEST(TrainingMeshTest, Errors) {
  absl::Status s = TrainingMesh::Create({.dp_shard = 0, .tp = 0}, 8).status();
  EXPECT_TRUE(Has(s, "leave 2 axes at 0")) << s;
  s = TrainingMesh::Create({.dp_shard = 3, .tp = 2}, 8).status();
  EXPECT_TRUE(Has(s, "multiply to 6 but the world size is 8")) << s;
  EXPECT_TRUE(Has(s, "launch a multiple of 6")) << s;
  s = TrainingMesh::Create({.dp_shard = 2, .tp = 2}, 8).status();
  EXPECT_TRUE(Has(s, "--dp_shard=0")) << s;
  s = TrainingMesh::Create({.dp_shard = 0, .tp = 3}, 8).status();
  EXPECT_TRUE(Has(s, "(before the 0 axis)")) << s;
  s = TrainingMesh::Create({.dp_shard = 0, .ep = 3}, 4).status();
  EXPECT_TRUE(Has(s, "--ep=3 with dp_shard=4 x cp=1")) << s;
  s = TrainingMesh::Create({.tp = -1}, 4).status();
  EXPECT_TRUE(Has(s, "--tp=-1")) << s;
}

}  // namespace
}  // namespace weft::comm
