#include "comm/process_group/comm_stats.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

TEST(CommStatsTest, BusBytesFollowNcclTests) {
  // n = 4, S = 1000 bytes.
  EXPECT_DOUBLE_EQ(BusBytes(OpKind::kAllReduce, 1000, 4), 1500.0);
  EXPECT_DOUBLE_EQ(BusBytes(OpKind::kReduceScatter, 1000, 4), 750.0);
  EXPECT_DOUBLE_EQ(BusBytes(OpKind::kAllGather, 1000, 4, 250), 750.0);
  EXPECT_DOUBLE_EQ(BusBytes(OpKind::kBroadcast, 1000, 4), 1000.0);
  EXPECT_DOUBLE_EQ(BusBytes(OpKind::kAllToAll, 1000, 4), 750.0);
  EXPECT_DOUBLE_EQ(BusBytes(OpKind::kAllToAllV, 1000, 4, 100), 900.0);
  EXPECT_DOUBLE_EQ(BusBytes(OpKind::kSend, 1000, 4), 1000.0);
  EXPECT_DOUBLE_EQ(BusBytes(OpKind::kBarrier, 0, 4), 0.0);
  // One rank moves nothing.
  EXPECT_DOUBLE_EQ(BusBytes(OpKind::kAllReduce, 1000, 1), 0.0);
}

TEST(CommStatsTest, RecorderAccumulatesAndResets) {
  CommStatsRecorder recorder;
  recorder.Record(OpKind::kAllReduce, 100, 150.0);
  recorder.Record(OpKind::kAllReduce, 100, 150.0);
  recorder.Record(OpKind::kAllGather, 40, 30.0);
  CommStats stats = recorder.Snapshot();
  EXPECT_EQ(stats[OpKind::kAllReduce].calls, 2);
  EXPECT_EQ(stats[OpKind::kAllReduce].payload_bytes, 200);
  EXPECT_DOUBLE_EQ(stats[OpKind::kAllReduce].bus_bytes, 300.0);
  EXPECT_EQ(stats.Total().calls, 3);
  EXPECT_DOUBLE_EQ(stats.Total().bus_bytes, 330.0);
  EXPECT_TRUE(absl::StrContains(stats.ToString(), "all_reduce calls=2")) << stats.ToString();
  EXPECT_FALSE(absl::StrContains(stats.ToString(), "broadcast"));
  recorder.Reset();
  EXPECT_EQ(recorder.Snapshot().Total().calls, 0);
  EXPECT_EQ(recorder.Snapshot().ToString(), "no communication");
}

}  // namespace
}  // namespace weft::comm
