#include "core/kernels/vocab_shard.h"

#include "gtest/gtest.h"

namespace weft {
namespace {

// GPT-2: 50257 real classes padded to 50304, split over tp=4 (12576 each):
// the last shard holds 12576 - 47 real columns, the others are all real.
TEST(VocabShardTest, RealColumnsOfGpt2Shards) {
  constexpr int64_t kVocab = 50257, kCols = 50304 / 4;
  EXPECT_EQ(VocabRealColumns(0, kCols, kVocab), kCols);
  EXPECT_EQ(VocabRealColumns(2 * kCols, kCols, kVocab), kCols);
  EXPECT_EQ(VocabRealColumns(3 * kCols, kCols, kVocab), kCols - 47);
  // tp=1: the whole padded row, real up to vocab.
  EXPECT_EQ(VocabRealColumns(0, 50304, kVocab), kVocab);
}

TEST(VocabShardTest, ShardOfPaddingOnlyHasNoRealColumn) {
  // vocab 5 padded to 16 over 4 shards of 4: shards 2 and 3 are padding.
  EXPECT_EQ(VocabRealColumns(4, 4, 5), 1);
  EXPECT_EQ(VocabRealColumns(8, 4, 5), 0);
  EXPECT_EQ(VocabRealColumns(12, 4, 5), 0);
}

TEST(VocabShardTest, LocalColumnOnlyForRealColumnsHeldHere) {
  const int64_t begin = 8, real = 3;  // global columns 8, 9, 10 real here
  EXPECT_EQ(VocabLocalColumn(8, begin, real), 0);
  EXPECT_EQ(VocabLocalColumn(10, begin, real), 2);
  EXPECT_EQ(VocabLocalColumn(11, begin, real), -1);  // padding (or >= vocab)
  EXPECT_EQ(VocabLocalColumn(7, begin, real), -1);   // the previous shard's
  EXPECT_EQ(VocabLocalColumn(-1, 0, real), -1);      // ignored target
  EXPECT_EQ(VocabLocalColumn(-100, 0, 4), -1);
}

TEST(VocabShardTest, LocalRowIncludesPaddingRows) {
  EXPECT_EQ(VocabLocalRow(12, 12, 4), 0);
  EXPECT_EQ(VocabLocalRow(15, 12, 4), 3);
  EXPECT_EQ(VocabLocalRow(16, 12, 4), -1);
  EXPECT_EQ(VocabLocalRow(11, 12, 4), -1);
  EXPECT_EQ(VocabLocalRow(-1, 0, 4), -1);
  // Ids near 2^31 do not wrap: the arithmetic is 64-bit.
  EXPECT_EQ(VocabLocalRow(2147483647, 0, 50304), -1);
}

}  // namespace
}  // namespace weft
