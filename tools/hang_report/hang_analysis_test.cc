#include "tools/hang_report/hang_analysis.h"

#include "comm/process_group/flight_recorder.h"
#include "comm/process_group/op_info.h"
#include "gtest/gtest.h"

namespace weft::hang {
namespace {

DumpedOp Op(const std::string& group, std::vector<int> ranks, int64_t seq, bool ended,
            int64_t n = 1000, int64_t issued_us = 0) {
  DumpedOp op;
  op.group = group;
  op.ranks = std::move(ranks);
  op.seq = seq;
  op.op = "all_reduce";
  op.fingerprint = "all_reduce sum f32 n=" + std::to_string(n);
  op.state = ended ? "completed" : "started";
  op.issued_us = issued_us > 0 ? issued_us : 1000 * seq;
  return op;
}

// Four ranks that each issue all_reduce #1..#last on 'world'; the last one
// is left waiting.
std::vector<RankDump> Healthy(int64_t last, bool last_ended = false) {
  std::vector<RankDump> dumps;
  for (int r = 0; r < 4; ++r) {
    RankDump d;
    d.rank = r;
    d.world_size = 4;
    d.reason = "failed: timeout";
    d.dumped_us = 10000000;  // 10 s after the ops: a hang's dumps
    for (int64_t k = 1; k <= last; ++k) {
      d.ops.push_back(Op("world", {0, 1, 2, 3}, k, k < last || last_ended));
    }
    dumps.push_back(std::move(d));
  }
  return dumps;
}

TEST(HangAnalysisTest, AgreeingRanksGiveNoDivergence) {
  const Report r = Analyze(Healthy(5, /*last_ended=*/true));
  EXPECT_TRUE(r.divergences.empty());
  EXPECT_TRUE(r.missing.empty());
  EXPECT_NE(r.verdict.find("agree"), std::string::npos) << r.verdict;
  EXPECT_EQ(r.details.size(), 4u);
}

TEST(HangAnalysisTest, ASkippedCollectiveNamesTheRankAndTheOp) {
  std::vector<RankDump> dumps = Healthy(3);
  // Rank 1 never issued #2 but went on to #3.
  dumps[1].ops.erase(dumps[1].ops.begin() + 1);
  const Report r = Analyze(dumps);
  ASSERT_EQ(r.divergences.size(), 1u);
  const Divergence& d = r.divergences[0];
  EXPECT_EQ(d.kind, Divergence::Kind::kSkipped);
  EXPECT_EQ(d.seq, 2);
  EXPECT_EQ(d.culprits, std::vector<int>({1}));
  EXPECT_EQ(d.others, std::vector<int>({0, 2, 3}));
  EXPECT_NE(r.verdict.find("rank 1 never issued all_reduce #2 on group 'world'"), std::string::npos)
      << r.verdict;
}

TEST(HangAnalysisTest, ARankThatNeverGotThereIsNamedWithItsLastOp) {
  std::vector<RankDump> dumps = Healthy(3);
  dumps[2].ops.pop_back();                       // rank 2 stopped after #2 on 'world' ...
  dumps[2].ops.push_back(Op("tp", {2, 3}, 7, false));  // ... and waits in another group
  const Report r = Analyze(dumps);
  ASSERT_FALSE(r.divergences.empty());
  const Divergence& d = r.divergences[0];
  EXPECT_EQ(d.kind, Divergence::Kind::kBehind);
  EXPECT_EQ(d.culprits, std::vector<int>({2}));
  EXPECT_EQ(d.seq, 3);
  EXPECT_NE(d.line.find("all_reduce #7 on group 'tp' (ranks 2, 3), started"), std::string::npos)
      << d.line;
}

// A SIGUSR2 snapshot: rank 2 dumped just before it would have issued #3.
TEST(HangAnalysisTest, ARankJustBehindInASnapshotIsNotNamed) {
  std::vector<RankDump> dumps = Healthy(3);
  for (RankDump& d : dumps) d.dumped_us = 3000 + 500;  // #3 issued at 3000 us
  dumps[2].ops.pop_back();
  const Report r = Analyze(dumps);
  EXPECT_TRUE(r.divergences.empty()) << r.verdict;
}

TEST(HangAnalysisTest, OtherSizesNameTheMinority) {
  std::vector<RankDump> dumps = Healthy(3);
  dumps[3].ops[1] = Op("world", {0, 1, 2, 3}, 2, false, /*n=*/999);
  const Report r = Analyze(dumps);
  ASSERT_EQ(r.divergences.size(), 1u);
  const Divergence& d = r.divergences[0];
  EXPECT_EQ(d.kind, Divergence::Kind::kMismatch);
  EXPECT_EQ(d.culprits, std::vector<int>({3}));
  EXPECT_EQ(d.others, std::vector<int>({0, 1, 2}));
  EXPECT_NE(d.line.find("'all_reduce sum f32 n=999'"), std::string::npos) << d.line;
}

TEST(HangAnalysisTest, AnOpEveryRankIssuedAndNoneFinishedIsStuck) {
  const Report r = Analyze(Healthy(4));
  ASSERT_EQ(r.divergences.size(), 1u);
  EXPECT_EQ(r.divergences[0].kind, Divergence::Kind::kStuck);
  EXPECT_EQ(r.divergences[0].seq, 4);
}

TEST(HangAnalysisTest, ARankWithoutADumpIsBlamedWhenTheOthersWaitForIt) {
  std::vector<RankDump> dumps = Healthy(3);
  dumps.pop_back();
  const Report r = Analyze(dumps);
  EXPECT_EQ(r.missing, std::vector<int>({3}));
  ASSERT_EQ(r.divergences.size(), 1u);
  EXPECT_EQ(r.divergences[0].culprits, std::vector<int>({3}));
  EXPECT_NE(r.verdict.find("rank 3 left no dump"), std::string::npos) << r.verdict;
}

TEST(HangAnalysisTest, TheVerdictIsTheDivergenceIssuedFirst) {
  std::vector<RankDump> dumps = Healthy(3);
  // 'world' diverges at #2 (issued at 2000 us); 'tp' of ranks 0 and 1 at #1,
  // issued earlier (500 us).
  dumps[1].ops.erase(dumps[1].ops.begin() + 1);
  dumps[0].ops.insert(dumps[0].ops.begin(), Op("tp", {0, 1}, 1, false, 64, 500));
  dumps[1].ops.insert(dumps[1].ops.begin(), Op("tp", {0, 1}, 1, false, 32, 500));
  const Report r = Analyze(dumps);
  ASSERT_EQ(r.divergences.size(), 2u);
  EXPECT_NE(r.verdict.find("group 'tp'"), std::string::npos) << r.verdict;
}

// The recorder's own JSON parses back, states and all.
TEST(HangAnalysisTest, ReadsWhatTheFlightRecorderWrites) {
  comm::FlightRecorder& rec = comm::FlightRecorder::Global();
  rec.SetCapacity(2);
  rec.SetIdentity(1, 2);
  comm::OpInfo info;
  info.op = "all_reduce";
  info.detail = "sum, f32[4] = 16 B";
  info.fingerprint = "all_reduce sum f32 n=4";
  for (int64_t k = 1; k <= 3; ++k) {
    info.seq = k;
    auto e = rec.Record(info, "world", 1, 2, nullptr);
    ASSERT_NE(e, nullptr);
    if (k < 3) e->MarkEnded(true);
  }
  absl::StatusOr<RankDump> d = ParseDump(rec.ToJson("SIGUSR2"), "dump");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->rank, 1);
  EXPECT_EQ(d->world_size, 2);
  EXPECT_EQ(d->reason, "SIGUSR2");
  ASSERT_EQ(d->ops.size(), 2u);  // the capacity keeps the last two
  EXPECT_EQ(d->ops[0].seq, 2);
  EXPECT_EQ(d->ops[0].state, "completed");
  EXPECT_EQ(d->ops[1].state, "issued");
  EXPECT_EQ(d->ops[1].ranks, std::vector<int>({0, 1}));
  rec.SetCapacity(0);
  EXPECT_EQ(rec.Record(info, "world", 1, 2, nullptr), nullptr);
  rec.SetCapacity(comm::FlightRecorder::kDefaultCapacity);
}

}  // namespace
}  // namespace weft::hang
