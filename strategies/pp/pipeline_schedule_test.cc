// The schedules against their definitions: exact per-rank orders (text), the
// bubble and in-flight memory each must have in a simulation with fixed
// costs, and validation that rejects incomplete or deadlocking orders, so
// a wrong schedule cannot pass on loss parity alone.
#include "strategies/pp/pipeline_schedule.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "strategies/pp/schedule_simulator.h"

namespace weft::pp {
namespace {

Timeline Build(const std::string& name, PipelineShape shape) {
  auto s = MakePipelineSchedule(name);
  EXPECT_TRUE(s.ok()) << s.status();
  auto t = (*s)->Build(shape);
  EXPECT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(ValidateTimeline(*t, shape, (*s)->SplitsBackward()).ok());
  return *t;
}

TEST(PipelineScheduleTest, OneFOneBWarmsUpRunsOneForwardOneBackwardAndCoolsDown) {
  const PipelineShape shape{.stages = 4, .micro = 6};
  EXPECT_EQ(FormatTimeline(Build("1f1b", shape), shape),
            "rank 0: F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5\n"
            "rank 1: F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5\n"
            "rank 2: F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5\n"
            "rank 3: F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5\n");
}

TEST(PipelineScheduleTest, GPipeRunsEveryForwardFirst) {
  const PipelineShape shape{.stages = 2, .micro = 3};
  EXPECT_EQ(FormatTimeline(Build("gpipe", shape), shape),
            "rank 0: F0 F1 F2 B0 B1 B2\nrank 1: F0 F1 F2 B0 B1 B2\n");
}

TEST(PipelineScheduleTest, ZeroBubbleDefersUpToRankWeightGradients) {
  const PipelineShape shape{.stages = 3, .micro = 4};
  EXPECT_EQ(FormatTimeline(Build("zbh1", shape), shape),
            "rank 0: F0 F1 F2 B0 W0 F3 B1 W1 B2 W2 B3 W3\n"
            "rank 1: F0 F1 B0 F2 B1 W0 F3 B2 W1 B3 W2 W3\n"
            "rank 2: F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 W2 W3\n");
}

TEST(PipelineScheduleTest, InterleavedGoesThroughTheChunksInGroupsOfRanks) {
  const PipelineShape shape{.stages = 2, .chunks = 2, .micro = 4};
  EXPECT_EQ(FormatTimeline(Build("interleaved", shape), shape),
            "rank 0: F0:0 F1:0 F0:1 F1:1 F2:0 B0:1 F3:0 B1:1 F2:1 B0:0 F3:1 B1:0 B2:1 B3:1 B2:0 "
            "B3:0\n"
            "rank 1: F0:0 F1:0 F0:1 B0:1 F1:1 B1:1 F2:0 B0:0 F3:0 B1:0 F2:1 B2:1 F3:1 B3:1 B2:0 "
            "B3:0\n");
}

TEST(PipelineScheduleTest, BubblesAndMemoryMatchEachScheduleDefinition) {
  const int p = 4, m = 8;
  // GPipe and 1F1B: (p - 1) / (m + p - 1) idle; GPipe holds all m
  // micro-batches, 1F1B at most p - r on rank r.
  for (const std::string name : {"gpipe", "1f1b"}) {
    const PipelineShape shape{.stages = p, .micro = m};
    auto sim = Simulate(Build(name, shape), shape, false);
    ASSERT_TRUE(sim.ok());
    EXPECT_DOUBLE_EQ(sim->makespan, 3.0 * (m + p - 1)) << name;
    EXPECT_DOUBLE_EQ(sim->bubble_fraction, double(p - 1) / (m + p - 1)) << name;
    for (int r = 0; r < p; ++r) EXPECT_EQ(sim->peak_in_flight[r], name == "gpipe" ? m : p - r);
  }
  // ZB-H1 with F = B = W: a bubble of p - 1 units (1F1B's third), at most
  // p micro-batches held on any rank (1F1B's peak).
  {
    const PipelineShape shape{.stages = p, .micro = m};
    auto sim = Simulate(Build("zbh1", shape), shape, true);
    ASSERT_TRUE(sim.ok());
    EXPECT_DOUBLE_EQ(sim->makespan, 3.0 * m + (p - 1));
    for (int r = 0; r < p; ++r) EXPECT_LE(sim->peak_in_flight[r], p);
  }
  // Interleaved with v chunks of 1/v of the work each: the bubble shrinks.
  {
    const int v = 2;
    const PipelineShape shape{.stages = p, .chunks = v, .micro = m};
    auto sim = Simulate(Build("interleaved", shape), shape, false,
                        {.forward = 1.0 / v, .backward = 2.0 / v});
    ASSERT_TRUE(sim.ok());
    EXPECT_DOUBLE_EQ(sim->busy, 3.0 * m);
    EXPECT_LT(sim->bubble_fraction, double(p - 1) / (m + p - 1));
    EXPECT_DOUBLE_EQ(sim->makespan, 28.5);  // 1F1B: 33
  }
}

TEST(PipelineScheduleTest, ValidationRejectsMissingRepeatedAndDeadlockingOrders) {
  const PipelineShape shape{.stages = 2, .micro = 2};
  using K = PipeAction::Kind;
  Timeline missing = {{{K::kForward, 0}, {K::kForward, 1}, {K::kBackward, 0}},
                      {{K::kForward, 0}, {K::kBackward, 0}, {K::kForward, 1}, {K::kBackward, 1}}};
  absl::Status m = ValidateTimeline(missing, shape, false);
  EXPECT_NE(m.message().find("rank 0 runs B1 0 times"), std::string::npos) << m;
  // Rank 1 waits for F1 before B0; rank 0 sends F1 only after B0 came back.
  Timeline deadlock = {{{K::kForward, 0}, {K::kBackward, 0}, {K::kForward, 1}, {K::kBackward, 1}},
                       {{K::kForward, 1}, {K::kForward, 0}, {K::kBackward, 0}, {K::kBackward, 1}}};
  absl::Status s = ValidateTimeline(deadlock, shape, false);
  EXPECT_NE(s.message().find("deadlocks: rank 0 at B0, rank 1 at F1"), std::string::npos) << s;
  Timeline weight_without_split = {{{K::kForward, 0}, {K::kWeight, 0}}, {}};
  EXPECT_FALSE(ValidateTimeline(weight_without_split, shape, false).ok());
}

TEST(PipelineScheduleTest, ShapesEachScheduleCannotTakeAreRefused) {
  EXPECT_FALSE((*MakePipelineSchedule("interleaved"))->Build({.stages = 4, .chunks = 2, .micro = 6}).ok());
  EXPECT_FALSE((*MakePipelineSchedule("1f1b"))->Build({.stages = 4, .chunks = 2, .micro = 8}).ok());
  absl::Status s = MakePipelineSchedule("bubbles").status();
  EXPECT_NE(s.message().find("gpipe, 1f1b, interleaved, zbh1"), std::string::npos) << s;
}

TEST(PipelineScheduleTest, TextChartAndChromeTraceShowEveryAction) {
  const PipelineShape shape{.stages = 2, .micro = 2};
  auto sim = Simulate(Build("1f1b", shape), shape, false);
  ASSERT_TRUE(sim.ok());
  EXPECT_EQ(TextChart(*sim, 2), "rank 0 |FF..Bb.Bb|\nrank 1 |.FBbFBb..|\n");
  const std::string trace = ChromeTrace(*sim, "1f1b");
  size_t events = 0;
  for (size_t at = trace.find("\"ph\":\"X\""); at != std::string::npos;
       at = trace.find("\"ph\":\"X\"", at + 1)) {
    ++events;
  }
  EXPECT_EQ(events, 8u);
  EXPECT_NE(trace.find("\"tid\":1"), std::string::npos);
}

}  // namespace
}  // namespace weft::pp
