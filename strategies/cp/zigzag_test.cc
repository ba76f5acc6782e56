#include "strategies/cp/zigzag.h"

#include <vector>

#include "gtest/gtest.h"

namespace weft::cp {
namespace {

TEST(ZigzagTest, RanksPairAnEarlyAndALateChunk) {
  auto c = ZigzagChunks(1, 4, 64);  // 8 chunks of 8: rank 1 holds chunks 1 and 6
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->chunk_len, 8);
  EXPECT_EQ(c->count, 2);
  EXPECT_EQ(c->offsets[0], 8);
  EXPECT_EQ(c->offsets[1], 48);
  EXPECT_EQ(c->Position(0), 8);
  EXPECT_EQ(c->Position(9), 49);
}

TEST(ZigzagTest, ChunksOfAllRanksCoverTheSequenceOnce) {
  for (int cp : {1, 2, 3, 4}) {
    const int64_t t = 2 * cp * 5;
    std::vector<int> seen(t, 0);
    for (int r = 0; r < cp; ++r) {
      auto c = ZigzagChunks(r, cp, t);
      ASSERT_TRUE(c.ok());
      for (int64_t i = 0; i < c->size(); ++i) ++seen[c->Position(i)];
    }
    for (int64_t p = 0; p < t; ++p) EXPECT_EQ(seen[p], 1) << "cp " << cp << " position " << p;
  }
}

TEST(ZigzagTest, CausalWorkIsBalanced) {
  // Visible (query, key) pairs per rank: equal for every rank.
  const int cp = 4;
  const int64_t t = 2 * cp * 6;
  std::vector<int64_t> work;
  for (int r = 0; r < cp; ++r) {
    auto c = ZigzagChunks(r, cp, t);
    int64_t pairs = 0;
    for (int64_t i = 0; i < c->size(); ++i) pairs += c->Position(i) + 1;
    work.push_back(pairs);
  }
  for (int64_t w : work) EXPECT_EQ(w, work[0]);
}

TEST(ZigzagTest, IndivisibleSeqLenSaysWhatAndSuggests) {
  const absl::Status s = CheckSeqLen(100, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("seq_len=100 with --cp=4"), std::string::npos) << s;
  EXPECT_NE(s.message().find("divisible by 2 x cp = 8"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--seq_len=96 or 104"), std::string::npos) << s;
  EXPECT_EQ(ZigzagChunks(0, 3, 9).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ZigzagTest, TakeChunksGathersColumns) {
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  std::vector<int32_t> v(2 * 8);
  for (int i = 0; i < 16; ++i) v[i] = i;
  Tensor full = *Tensor::FromVector<int32_t>(v, {2, 8});
  auto c = ZigzagChunks(0, 2, 8);  // chunks 0 and 3 of length 2
  auto local = TakeChunks(ctx, full, *c);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(*local->ToVector<int32_t>(), (std::vector<int32_t>{0, 1, 6, 7, 8, 9, 14, 15}));
}

}  // namespace
}  // namespace weft::cp
