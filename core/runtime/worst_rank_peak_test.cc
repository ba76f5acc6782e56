#include "core/runtime/worst_rank_peak.h"

#include <thread>
#include <vector>

#include "comm/store/hash_store.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(WorstRankPeakTest, RankZeroGetsTheLargestPeakAndItsRank) {
  comm::HashStore store;
  const std::vector<double> peaks = {10.5, 12.25, 30.0, 30.0};  // tie: rank 2 wins
  std::vector<RankPeak> got(peaks.size());
  std::vector<std::thread> ranks;
  for (int r = 0; r < static_cast<int>(peaks.size()); ++r) {
    ranks.emplace_back([&, r] {
      absl::StatusOr<RankPeak> p =
          WorstRankPeak(store, r, static_cast<int>(peaks.size()), peaks[r], absl::Seconds(10));
      ASSERT_TRUE(p.ok()) << p.status();
      got[r] = *p;
    });
  }
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(got[0].rank, 2);
  EXPECT_DOUBLE_EQ(got[0].peak_mem_mb, 30.0);
  EXPECT_EQ(got[1].rank, 1);  // the others keep their own
  EXPECT_DOUBLE_EQ(got[1].peak_mem_mb, 12.25);
  // Rank 0 removed the keys: a later run on the same store waits for its own.
  EXPECT_EQ(*store.NumKeys(), 0);
}

TEST(WorstRankPeakTest, AMissingRankTimesOutNamingIt) {
  comm::HashStore store;
  ASSERT_TRUE(WorstRankPeak(store, 1, 3, 5.0, absl::Seconds(1)).ok());
  absl::StatusOr<RankPeak> p = WorstRankPeak(store, 0, 3, 4.0, absl::Milliseconds(200));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("rank 2's peak memory"), std::string::npos) << p.status();
}

}  // namespace
}  // namespace weft
