#include "core/nn/tp_plan.h"

#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(ParallelPlanTest, StarMatchesExactlyOneComponent) {
  EXPECT_TRUE(MatchesPlanPattern("blocks.*.attn.qkv", "blocks.3.attn.qkv"));
  EXPECT_TRUE(MatchesPlanPattern("blocks.*.attn.qkv", "blocks.11.attn.qkv"));
  EXPECT_FALSE(MatchesPlanPattern("blocks.*.attn.qkv", "blocks.3.attn.proj"));
  EXPECT_FALSE(MatchesPlanPattern("blocks.*.attn", "blocks.3.attn.qkv"));
  EXPECT_FALSE(MatchesPlanPattern("blocks.*.attn.qkv", "blocks.3.attn"));
  EXPECT_FALSE(MatchesPlanPattern("blocks.*.attn.qkv", "blocks.attn.qkv"));
  EXPECT_TRUE(MatchesPlanPattern("embed", "embed"));
  EXPECT_FALSE(MatchesPlanPattern("embed", "embed_x"));
}

}  // namespace
}  // namespace weft
