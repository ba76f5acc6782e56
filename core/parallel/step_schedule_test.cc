#include "core/parallel/step_schedule.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace weft {
namespace {

// Records what the executor asked for, and what participants were told.
class Recorder : public MicroBatchRunner, public StepParticipant {
 public:
  absl::Status Forward(int m) override {
    log.push_back("F" + std::to_string(m));
    return absl::OkStatus();
  }
  absl::Status Backward(int m) override {
    log.push_back("B" + std::to_string(m));
    return absl::OkStatus();
  }
  absl::Status BeforeBackward(const BackwardInfo& info) override {
    log.push_back(std::string(info.last ? "last:" : "pre:") + std::to_string(info.micro));
    return absl::OkStatus();
  }
  std::vector<std::string> log;
};

absl::Status RunWith(const StepSchedule& s, int n, Recorder& r) {
  // The recorder is also the only participant; it is not owned here.
  std::vector<std::unique_ptr<StepParticipant>> participants;
  participants.emplace_back(&r);
  absl::Status st = s.Run(n, r, participants);
  (void)participants[0].release();
  return st;
}

TEST(StepScheduleTest, GradAccumAlternatesAndMarksTheLastBackward) {
  GradAccumSchedule s;
  EXPECT_EQ(ActionsToString(s.Actions(3)), "F0 B0 F1 B1 F2 B2");
  Recorder r;
  ASSERT_TRUE(RunWith(s, 3, r).ok());
  EXPECT_EQ(r.log, (std::vector<std::string>{"F0", "pre:0", "B0", "F1", "pre:1", "B1", "F2",
                                             "last:2", "B2"}));
}

TEST(StepScheduleTest, FixedOrderRunsMicroBatchesInFlight) {
  auto s = FixedOrderSchedule::Parse("F0 F1 F2 B2 B0 B1");
  ASSERT_TRUE(s.ok()) << s.status();
  Recorder r;
  ASSERT_TRUE(RunWith(**s, 3, r).ok());
  // The last backward is the last one run, whichever micro-batch it is.
  EXPECT_EQ(r.log, (std::vector<std::string>{"F0", "F1", "F2", "pre:2", "B2", "pre:0", "B0",
                                             "last:1", "B1"}));
}

TEST(StepScheduleTest, RejectsInvalidOrders) {
  EXPECT_FALSE(FixedOrderSchedule::Parse("B0 F0").ok());        // backward first
  EXPECT_FALSE(FixedOrderSchedule::Parse("F0 F0 B0").ok());     // forward twice
  EXPECT_FALSE(FixedOrderSchedule::Parse("F0 B0 F2 B2").ok());  // micro-batch 1 missing
  EXPECT_FALSE(FixedOrderSchedule::Parse("F0 X0").ok());
  auto s = FixedOrderSchedule::Parse("F0 B0 F1 B1");
  ASSERT_TRUE(s.ok());
  Recorder r;
  // Two micro-batches in the order, three asked for: an error, not a partial step.
  absl::Status st = RunWith(**s, 3, r);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("F2 and B2"), std::string::npos) << st;
  EXPECT_TRUE(r.log.empty());
}

}  // namespace
}  // namespace weft
