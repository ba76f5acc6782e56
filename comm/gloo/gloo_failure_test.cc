// No hangs: dead ranks, missing ranks, mismatched ops and impatient waits
// all end every rank with a rich error within the timeout.
#include <signal.h>
#include <unistd.h>

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm/process_group/registry.h"
#include "comm/testing/expect.h"
#include "comm/testing/multiprocess.h"
#include "core/base/status_macros.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

using testing::ExpectTrue;
using testing::RankContext;
using testing::RankResult;

using Clock = std::chrono::steady_clock;

absl::Status ExpectContains(const absl::Status& s, absl::string_view part) {
  return ExpectTrue(absl::StrContains(s.ToString(), part),
                    absl::StrCat("expected '", part, "' in: ", s.ToString()));
}

// The acceptance test: one of 4 worker processes dies in the middle of a
// collective; the other three must fail within the timeout plus a few
// seconds, naming the group, sequence number, op and sizes.
TEST(GlooFailureTest, KilledRankFailsEveryOtherRankWithinTheTimeout) {
  constexpr absl::Duration kTimeout = absl::Seconds(3);
  const auto start = Clock::now();
  std::vector<RankResult> results = testing::RunRanksInProcesses(
      4,
      [&](const RankContext& ctx) -> absl::Status {
        WEFT_ASSIGN_OR_RETURN(auto pg, ctx.NewGroup("gloo", {.timeout = kTimeout}));
        WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros({1 << 16}, DType::kF32));
        for (int step = 1; step <= 2; ++step) WEFT_RETURN_IF_ERROR(pg->AllReduce(t)->Wait());
        auto work = pg->AllReduce(t);  // #3: rank 2 dies inside it
        if (ctx.rank == 2) ::raise(SIGKILL);
        absl::Status s = work->Wait();
        // The first error also fails every later op at once.
        const auto before = Clock::now();
        absl::Status later = pg->Broadcast(t)->Wait();
        WEFT_RETURN_IF_ERROR(ExpectTrue(!later.ok(), "broadcast after a failure succeeded"));
        WEFT_RETURN_IF_ERROR(ExpectContains(later, "all_reduce #3"));
        WEFT_RETURN_IF_ERROR(ExpectTrue(Clock::now() - before < std::chrono::milliseconds(500),
                                        "a broken group did not fail fast"));
        return s;
      },
      {.deadline = absl::Seconds(30)});
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(wall, absl::ToDoubleSeconds(kTimeout) + 8.0);
  EXPECT_EQ(results[2].signal, SIGKILL);
  for (int r : {0, 1, 3}) {
    const absl::Status& s = results[r].status;
    SCOPED_TRACE(absl::StrCat("rank ", r, ": ", s.ToString()));
    EXPECT_FALSE(s.ok());
    EXPECT_FALSE(results[r].timed_out);
    EXPECT_EQ(results[r].exit_code, 1);
    EXPECT_LT(results[r].elapsed, kTimeout + absl::Seconds(6));
    EXPECT_TRUE(absl::StrContains(s.message(), "all_reduce #3"));
    EXPECT_TRUE(absl::StrContains(s.message(), "group 'world'"));
    EXPECT_TRUE(absl::StrContains(s.message(), "f32[65536]"));
  }
  // At least one survivor saw the dead peer directly and names it.
  bool named = false;
  for (int r : {0, 1, 3}) named |= absl::StrContains(results[r].status.message(), "peer rank 2");
  EXPECT_TRUE(named) << results[0].status << "\n" << results[1].status;
}

// Two ranks die at once (a launcher killed with its workers): every
// survivor names a dead peer, from its socket or from the list of ranks
// that exited on this host (peer_directory_test covers the list alone).
TEST(GlooFailureTest, SeveralKilledRanksAreNamed) {
  constexpr absl::Duration kTimeout = absl::Seconds(3);
  std::vector<RankResult> results = testing::RunRanksInProcesses(
      4,
      [&](const RankContext& ctx) -> absl::Status {
        WEFT_ASSIGN_OR_RETURN(auto pg, ctx.NewGroup("gloo", {.timeout = kTimeout}));
        WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros({1 << 16}, DType::kF32));
        WEFT_RETURN_IF_ERROR(pg->AllReduce(t)->Wait());
        auto work = pg->AllReduce(t);
        if (ctx.rank >= 2) ::raise(SIGKILL);
        return work->Wait();
      },
      {.deadline = absl::Seconds(30)});
  for (int r : {0, 1}) {
    const absl::Status& s = results[r].status;
    SCOPED_TRACE(absl::StrCat("rank ", r, ": ", s.ToString()));
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(absl::StrContains(s.message(), "peer rank 2") ||
                absl::StrContains(s.message(), "peer rank 3") ||
                absl::StrContains(s.message(), "ranks 2, 3 on this host exited"));
  }
}

TEST(GlooFailureTest, MissingRankTimesOutNamingTheOp) {
  constexpr absl::Duration kTimeout = absl::Seconds(1);
  auto results = testing::RunRanksInThreads(3, [&](const RankContext& ctx) -> absl::Status {
    WEFT_ASSIGN_OR_RETURN(auto pg, ctx.NewGroup("gloo", {.timeout = kTimeout}));
    WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros({10}, DType::kBF16));
    WEFT_RETURN_IF_ERROR(pg->AllReduce(t)->Wait());
    if (ctx.rank == 1) {
      absl::SleepFor(kTimeout + absl::Seconds(1));  // never issues op #2
      return absl::OkStatus();
    }
    const auto start = Clock::now();
    absl::Status s = pg->AllReduce(t, {.op = ReduceOp::kMax})->Wait();
    WEFT_RETURN_IF_ERROR(ExpectTrue(s.code() == absl::StatusCode::kDeadlineExceeded,
                                    "expected DeadlineExceeded, got " + s.ToString()));
    WEFT_RETURN_IF_ERROR(ExpectContains(s, "all_reduce #2 (max, bf16[10]"));
    WEFT_RETURN_IF_ERROR(ExpectTrue(Clock::now() - start < std::chrono::seconds(3),
                                    "timed out too late"));
    return absl::OkStatus();
  });
  EXPECT_TRUE(testing::AllRanksOk(results).ok()) << testing::AllRanksOk(results);
}

TEST(GlooFailureTest, ImpatientWaitBreaksTheGroup) {
  auto results = testing::RunRanksInThreads(2, [&](const RankContext& ctx) -> absl::Status {
    WEFT_ASSIGN_OR_RETURN(auto pg, ctx.NewGroup("gloo", {.timeout = absl::Seconds(2)}));
    WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros({4}, DType::kF32));
    if (ctx.rank == 1) absl::SleepFor(absl::Milliseconds(500));
    absl::Status s = pg->AllReduce(t)->Wait(ctx.rank == 0 ? absl::Milliseconds(50)
                                                          : absl::InfiniteDuration());
    if (ctx.rank == 0) {
      WEFT_RETURN_IF_ERROR(ExpectTrue(s.code() == absl::StatusCode::kDeadlineExceeded,
                                      s.ToString()));
      WEFT_RETURN_IF_ERROR(ExpectContains(s, "Wait gave up"));
      WEFT_RETURN_IF_ERROR(ExpectTrue(!pg->health().ok(), "group should be broken"));
      WEFT_RETURN_IF_ERROR(ExpectContains(pg->Barrier()->Wait(), "Wait gave up"));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(testing::AllRanksOk(results).ok()) << testing::AllRanksOk(results);
}

// Without the consistency check, ranks that issue different sizes wait on
// different gloo slots (the tag carries the op's fingerprint) and time out
// with weft's error, each naming its own op and sizes; gloo used to abort a
// rank instead (SIGABRT: "op.preamble.length <= op.nbytes").
TEST(GlooFailureTest, MismatchedSizesFailInsteadOfHanging) {
  constexpr absl::Duration kTimeout = absl::Seconds(2);
  const auto start = Clock::now();
  auto results = testing::RunRanksInProcesses(
      2,
      [&](const RankContext& ctx) -> absl::Status {
        WEFT_ASSIGN_OR_RETURN(auto pg, ctx.NewGroup("gloo", {.timeout = kTimeout}));
        WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros({ctx.rank == 0 ? 8 : 64}, DType::kF32));
        return pg->AllReduce(t)->Wait();
      },
      {.deadline = absl::Seconds(20)});
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
  for (const RankResult& r : results) {
    EXPECT_FALSE(r.status.ok()) << "rank " << r.rank;
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank;
    EXPECT_EQ(r.signal, 0) << "rank " << r.rank << " was killed";
    EXPECT_EQ(r.status.code(), absl::StatusCode::kDeadlineExceeded) << r.status;
    const std::string sizes = r.rank == 0 ? "f32[8] = 32 B" : "f32[64] = 256 B";
    EXPECT_TRUE(absl::StrContains(r.status.message(), "all_reduce #1 (sum, " + sizes))
        << r.status;
  }
}

// With check_consistency the same mistake is a clear error on every rank.
TEST(GlooFailureTest, ConsistencyCheckNamesEveryRanksView) {
  auto results = testing::RunRanksInThreads(3, [](const RankContext& ctx) -> absl::Status {
    WEFT_ASSIGN_OR_RETURN(
        auto pg, ctx.NewGroup("gloo", {.timeout = absl::Seconds(5), .check_consistency = true}));
    WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros({ctx.rank == 1 ? 9 : 8}, DType::kF32));
    WEFT_RETURN_IF_ERROR(pg->Barrier()->Wait());
    absl::Status s = pg->AllReduce(t)->Wait();
    WEFT_RETURN_IF_ERROR(ExpectTrue(s.code() == absl::StatusCode::kFailedPrecondition,
                                    s.ToString()));
    WEFT_RETURN_IF_ERROR(ExpectContains(s, "rank 0: #2 all_reduce sum f32 n=8"));
    return ExpectContains(s, "rank 1: #2 all_reduce sum f32 n=9");
  });
  EXPECT_TRUE(testing::AllRanksOk(results).ok()) << testing::AllRanksOk(results);
}

TEST(GlooFailureTest, GroupCreationTimesOutWhenARankNeverJoins) {
  auto results = testing::RunRanksInThreads(3, [](const RankContext& ctx) -> absl::Status {
    if (ctx.rank == 2) return absl::OkStatus();  // never creates the group
    const auto start = Clock::now();
    auto pg = ctx.NewGroup("gloo", {.name = "lonely", .timeout = absl::Milliseconds(500)});
    WEFT_RETURN_IF_ERROR(ExpectTrue(!pg.ok(), "group creation should fail"));
    WEFT_RETURN_IF_ERROR(ExpectTrue(pg.status().code() == absl::StatusCode::kDeadlineExceeded,
                                    pg.status().ToString()));
    WEFT_RETURN_IF_ERROR(ExpectContains(pg.status(), "group 'lonely'"));
    WEFT_RETURN_IF_ERROR(ExpectContains(pg.status(), "pg/lonely/2"));
    return ExpectTrue(Clock::now() - start < std::chrono::seconds(3), "creation took too long");
  });
  EXPECT_TRUE(testing::AllRanksOk(results).ok()) << testing::AllRanksOk(results);
}

}  // namespace
}  // namespace weft::comm
