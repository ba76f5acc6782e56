#include "core/nn/placement.h"

#include <vector>

#include "core/nn/materialize.h"
#include "core/nn/parameter.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(PlacementTest, ShardsComposeIntoABox) {
  Placement p;
  EXPECT_EQ(p.ToString(), "Replicate");
  p.Shard("tp", 0, 1, 2).Shard("cp", 1, 2, 4);
  Box box = *p.LocalBox({6, 8, 3});
  EXPECT_EQ(box.shape, (Shape{3, 2, 3}));
  EXPECT_EQ(box.offsets, (std::vector<int64_t>{3, 4, 0}));
  EXPECT_TRUE(p.ShardedOver("tp"));
  EXPECT_TRUE(p.ReplicatedOver("dp_shard"));
  EXPECT_EQ(p.ToString(), "Shard(0)@tp, Shard(1)@cp");
}

TEST(PlacementTest, IndivisibleOrMissingDimensionIsAnError) {
  Placement p;
  p.Shard("tp", 1, 0, 3);
  absl::Status s = p.LocalBox({4, 8}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("dimension 1 of size 8 split 3 ways"), std::string::npos) << s;
  Placement q;
  q.Shard("tp", 2, 0, 2);
  EXPECT_FALSE(q.LocalBox({4, 8}).ok());
}

TEST(PlacementTest, FlatShardKeepsTheLocalShape) {
  Placement p;
  p.FlatShard("dp_shard", 0, 5);
  EXPECT_EQ(p.LocalBox({4, 4})->shape, (Shape{4, 4}));
  EXPECT_TRUE(p.ShardedOver("dp_shard"));
}

std::vector<float> Floats(const Tensor& t) { return *t.ToFloats(); }

// Local init equals the same box of the single-process init, for each rank
// of a 2- or 4-way split along either dimension.
TEST(PlacementTest, LocalInitIsTheSliceOfFullInit) {
  Parameter full("weight", {8, 6}, InitSpec::Normal(0.5f), true);
  full.set_name("blocks.0.attn.qkv.weight");
  std::vector<float> ref = Floats(*InitialValue(full, 42));
  for (int dim : {0, 1}) {
    for (int count : {2, dim == 0 ? 4 : 3}) {
      for (int rank = 0; rank < count; ++rank) {
        Parameter p("weight", {8, 6}, InitSpec::Normal(0.5f), true);
        p.set_name("blocks.0.attn.qkv.weight");
        Placement pl;
        pl.Shard("tp", dim, rank, count);
        ASSERT_TRUE(p.SetPlacement(pl).ok());
        EXPECT_EQ(p.global_shape(), (Shape{8, 6}));
        EXPECT_EQ(p.numel() * count, p.global_numel());
        std::vector<float> local = Floats(*InitialValue(p, 42));
        ASSERT_EQ(static_cast<int64_t>(local.size()), p.numel());
        for (int64_t i = 0; i < p.shape()[0]; ++i) {
          for (int64_t j = 0; j < p.shape()[1]; ++j) {
            const int64_t gi = i + p.local_offsets()[0], gj = j + p.local_offsets()[1];
            ASSERT_EQ(local[i * p.shape()[1] + j], ref[gi * 6 + gj])
                << "dim " << dim << " rank " << rank << "/" << count << " at " << i << "," << j;
          }
        }
      }
    }
  }
}

// A padded split of 7 rows over 3 ranks: blocks of 3 rows, the last rank
// covers row 6 only and stores two zero rows after it; init fills the
// covered rows with the single-process values. A block past the end (5
// rows over 4 ranks leaves the last one nothing) is an error.
TEST(PlacementTest, PaddedShardStoresWholeBlocksAndInitsTheRealRows) {
  Parameter full("wte", {7, 2}, InitSpec::Normal(0.5f), true);
  full.set_name("embed.wte");
  std::vector<float> ref = Floats(*InitialValue(full, 42));
  const int64_t covered[] = {3, 3, 1};
  for (int rank = 0; rank < 3; ++rank) {
    Parameter p("wte", {7, 2}, InitSpec::Normal(0.5f), true);
    p.set_name("embed.wte");
    Placement pl;
    pl.PaddedShard("tp", rank, 3);
    EXPECT_EQ(pl.ToString(), "PaddedShard(0)@tp");
    ASSERT_TRUE(p.SetPlacement(pl).ok());
    EXPECT_EQ(p.shape(), (Shape{3, 2}));
    EXPECT_EQ(p.box_shape(), (Shape{covered[rank], 2}));
    EXPECT_EQ(p.local_offsets(), (std::vector<int64_t>{3 * rank, 0}));
    std::vector<float> local = Floats(*InitialValue(p, 42));
    ASSERT_EQ(local.size(), 6u);
    for (int64_t i = 0; i < 6; ++i) {
      const float want = i < p.box_numel() ? ref[6 * rank + i] : 0.f;
      EXPECT_EQ(local[i], want) << "rank " << rank << " element " << i;
    }
  }
  Placement empty;
  empty.PaddedShard("tp", 3, 4);
  absl::Status s = empty.LocalBox({5, 2}).status();
  EXPECT_NE(s.message().find("whose every block holds at least one row"), std::string::npos) << s;
  Placement after;
  after.PaddedShard("tp", 0, 2).Shard("cp", 0, 0, 2);
  EXPECT_FALSE(after.LocalBox({8, 2}).ok());
}

TEST(PlacementTest, MaterializedLocalPieceAndLatePlacementError) {
  Parameter p("weight", {4, 4}, InitSpec::Ones(), false);
  p.set_name("w");
  Placement pl;
  pl.Shard("tp", 0, 0, 2);
  ASSERT_TRUE(p.SetPlacement(pl).ok());
  p.value = *InitialValue(p, 1);
  EXPECT_EQ(p.value.shape(), (Shape{2, 4}));
  absl::Status late = p.SetPlacement(Placement());
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition);
  Parameter q("bias", {5}, InitSpec::Zeros(), false);
  q.set_name("b");
  Placement odd;
  odd.Shard("tp", 0, 0, 2);
  absl::Status s = q.SetPlacement(odd);
  EXPECT_NE(s.message().find("placement of b"), std::string::npos) << s;
}

}  // namespace
}  // namespace weft
