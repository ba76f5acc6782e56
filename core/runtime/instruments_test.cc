#include "core/runtime/instruments.h"

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(InstrumentsTest, ParsesTraceStepRanges) {
  absl::StatusOr<StepRange> r = ParseStepRange("10:12");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->first, 10);
  EXPECT_EQ(r->last, 12);
  EXPECT_TRUE(r->Contains(11) && !r->Contains(13) && !r->Contains(9));
  r = ParseStepRange("7");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->Contains(7) && !r->Contains(8));
  EXPECT_TRUE(ParseStepRange("")->empty());
  for (const char* bad : {"12:10", "0:3", "a:b", "1:2:3", "-1"}) {
    absl::StatusOr<StepRange> b = ParseStepRange(bad);
    EXPECT_FALSE(b.ok()) << bad;
    if (!b.ok()) {
      EXPECT_NE(std::string(b.status().message()).find("--trace_steps"), std::string::npos);
    }
  }
}

// A comm wait on the training thread inside a part is exposed comm, not
// that part; the parts still add up to the step.
TEST(InstrumentsTest, CommWaitsInsideAPartCountAsExposedComm) {
  Stream host = Stream::Default(Device::Cpu());
  Instruments ins({.stream = &host, .total_steps = 1});
  auto busy = [](int ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  double wait_ms = 0;  // measured here: a loaded machine stretches the spins
  ins.BeginStep(1);
  {
    StepTimer::Scope backward(ins.timer(), StepPart::kBackward);
    busy(10);
    comm::OpInfo info;
    info.op = "all_reduce";
    info.group = "group 'g'";
    const auto wait_begin = std::chrono::steady_clock::now();
    ins.comm_observer()->OnWaitBegin(info);
    busy(20);
    comm::ObservedOp op;
    op.info = &info;
    op.payload_bytes = 3 << 20;
    ins.comm_observer()->OnWaitEnd(op);
    wait_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                        wait_begin).count();
    busy(10);
  }
  ins.MarkEnd();
  const double step_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  absl::StatusOr<Instruments::StepReport> r = ins.EndStep(step_ms);
  ASSERT_TRUE(r.ok()) << r.status();
  // Bounds rather than equalities: the instruments time the wait between
  // their own stamps, which lie inside the test's (a preemption between the
  // two pairs, on a loaded CI machine, once put 4 ms between them).
  const double exposed = r->parts[StepPart::kExposedComm];
  const double backward = r->parts[StepPart::kBackward];
  EXPECT_GE(wait_ms, 20);
  EXPECT_GE(exposed, 20 - 0.1) << "the 20 ms spin inside the wait";
  EXPECT_LE(exposed, wait_ms + 0.1) << "more than the test's own bracket";
  EXPECT_GE(backward, 20 - 0.1) << "the two 10 ms spins outside the wait";
  EXPECT_LE(backward, step_ms - exposed + 0.1);
  EXPECT_NEAR(r->parts.Sum(), step_ms, kSumSlackMs);
  EXPECT_DOUBLE_EQ(r->comm_mb, 3);
}

// Waits on another thread (e.g. a helper's) are not the step's.
TEST(InstrumentsTest, WaitsOnOtherThreadsDoNotMoveTheTimer) {
  Stream host = Stream::Default(Device::Cpu());
  Instruments ins({.stream = &host, .total_steps = 1});
  const auto t0 = std::chrono::steady_clock::now();
  ins.BeginStep(1);
  std::thread other([&] {
    comm::OpInfo info;
    ins.comm_observer()->OnWaitBegin(info);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    comm::ObservedOp op;
    op.info = &info;
    ins.comm_observer()->OnWaitEnd(op);
  });
  other.join();
  ins.MarkEnd();
  const double step_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  absl::StatusOr<Instruments::StepReport> r = ins.EndStep(step_ms);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->parts[StepPart::kExposedComm], 0);
  EXPECT_NEAR(r->parts[StepPart::kOther], step_ms, kSumSlackMs);
}

// Runs steps first..last through `ins` and finishes; returns what rank 0 printed.
std::string RunSteps(Instruments& ins, int64_t first, int64_t last) {
  absl::StatusOr<MetricsLogger> logger = MetricsLogger::Open("", true, true);
  std::string printed;
  logger->set_console_sink([&](const std::string& line) { printed += line + "\n"; });
  ins.set_logger(&*logger);
  for (int64_t step = first; step <= last; ++step) {
    ins.BeginStep(step);
    ins.MarkEnd();
    EXPECT_TRUE(ins.EndStep(1.0).ok());
  }
  EXPECT_TRUE(ins.Finish().ok());
  return printed;
}

// A run that ends before the window (--steps=5, --trace_steps=10:12) says
// nothing was traced instead of "trace: steps 10-12".
TEST(InstrumentsTest, AWindowAfterTheLastStepTracesNothingAndSaysSo) {
  Stream host = Stream::Default(Device::Cpu());
  const std::string dir = testing::TempDir() + "/window_after_run";
  Instruments ins({.stream = &host, .total_steps = 5, .trace_dir = dir,
                   .trace_steps = {10, 12}, .merge_wait_s = 0});
  const std::string printed = RunSteps(ins, 1, 5);
  EXPECT_NE(printed.find("no step traced: --trace_steps=10:12 lies outside this run's steps 1-5"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("--trace_steps=3:5"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("trace: steps"), std::string::npos) << printed;
  EXPECT_FALSE(std::filesystem::exists(MergedTracePath(dir)));
}

TEST(InstrumentsTest, ARunEndingInsideTheWindowNamesTheStepsItTraced) {
  Stream host = Stream::Default(Device::Cpu());
  const std::string dir = testing::TempDir() + "/window_cut_short";
  Instruments ins({.stream = &host, .total_steps = 11, .trace_dir = dir,
                   .trace_steps = {10, 12}, .merge_wait_s = 0});
  const std::string printed = RunSteps(ins, 1, 11);
  EXPECT_NE(printed.find("trace: steps 10-11 of 1 rank(s)"), std::string::npos) << printed;
  EXPECT_NE(printed.find("the run ended before step 12"), std::string::npos) << printed;
  EXPECT_TRUE(std::filesystem::exists(MergedTracePath(dir)));
}

}  // namespace
}  // namespace weft
