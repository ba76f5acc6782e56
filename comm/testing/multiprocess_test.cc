#include "comm/testing/multiprocess.h"

#include <signal.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "gtest/gtest.h"

namespace weft::comm::testing {
namespace {

class MultiprocessTest : public ::testing::TestWithParam<RankMode> {};

TEST_P(MultiprocessTest, RanksShareTheStore) {
  auto results = RunRanks(GetParam(), 3, [](const RankContext& ctx) -> absl::Status {
    WEFT_RETURN_IF_ERROR(ctx.store->Set(absl::StrCat("hello_", ctx.rank), "x"));
    WEFT_RETURN_IF_ERROR(ctx.store->Wait({"hello_0", "hello_1", "hello_2"}));
    auto n = ctx.store->Add("count", 1);
    return n.status();
  });
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(AllRanksOk(results).ok()) << AllRanksOk(results);
  for (const RankResult& r : results) {
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_FALSE(r.timed_out);
  }
}

TEST_P(MultiprocessTest, ErrorsComeBackPerRank) {
  auto results = RunRanks(GetParam(), 2, [](const RankContext& ctx) -> absl::Status {
    if (ctx.rank == 1) return absl::InvalidArgumentError("rank one is unhappy");
    return absl::OkStatus();
  });
  EXPECT_TRUE(results[0].status.ok());
  EXPECT_EQ(results[1].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(results[1].status.message(), "rank one is unhappy");
  EXPECT_EQ(results[1].exit_code, 1);
  absl::Status all = AllRanksOk(results);
  EXPECT_TRUE(absl::StrContains(all.message(), "rank 1: INVALID_ARGUMENT")) << all;
}

INSTANTIATE_TEST_SUITE_P(Modes, MultiprocessTest,
                         ::testing::Values(RankMode::kThreads, RankMode::kProcesses),
                         [](const auto& info) { return std::string(RankModeName(info.param)); });

TEST(MultiprocessProcessesTest, CrashesAreReportedWithTheSignal) {
  auto results = RunRanksInProcesses(2, [](const RankContext& ctx) -> absl::Status {
    if (ctx.rank == 0) ::raise(SIGKILL);
    return absl::OkStatus();
  });
  EXPECT_EQ(results[0].signal, SIGKILL);
  EXPECT_EQ(results[0].exit_code, -1);
  EXPECT_TRUE(absl::StrContains(results[0].status.message(), "signal 9")) << results[0].status;
  EXPECT_TRUE(results[1].status.ok());
}

TEST(MultiprocessProcessesTest, HungRanksAreKilledAtTheDeadline) {
  auto results = RunRanksInProcesses(
      2,
      [](const RankContext& ctx) -> absl::Status {
        if (ctx.rank == 1) ::pause();
        return absl::OkStatus();
      },
      {.deadline = absl::Milliseconds(500)});
  EXPECT_FALSE(results[0].timed_out);
  EXPECT_TRUE(results[1].timed_out);
  EXPECT_EQ(results[1].status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(results[1].elapsed, absl::Seconds(5));
}

TEST(MultiprocessProcessesTest, GtestFailuresInAChildFailThatRank) {
  // The child's own gtest prints this failure into the log; only the child
  // process records it, so the parent test still passes.
  auto results = RunRanksInProcesses(2, [](const RankContext& ctx) -> absl::Status {
    if (ctx.rank == 1) ADD_FAILURE() << "expected failure inside rank 1 (part of the test)";
    return absl::OkStatus();
  });
  EXPECT_TRUE(results[0].status.ok());
  EXPECT_TRUE(absl::StrContains(results[1].status.message(), "gtest expectation failed"))
      << results[1].status;
}

}  // namespace
}  // namespace weft::comm::testing
