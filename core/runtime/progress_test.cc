#include "core/runtime/progress.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

// Runs `fn` against a memory FILE and returns what it wrote.
template <typename Fn>
std::string Capture(Fn fn) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  fn(f);
  std::fclose(f);
  std::string out(buf, len);
  free(buf);
  return out;
}

TEST(ProgressTest, PicksTheBarOnlyForRankZeroOnATerminalWithoutQuiet) {
  EXPECT_EQ(Progress::PickMode(true, true, false), Progress::Mode::kBar);
  EXPECT_EQ(Progress::PickMode(true, false, false), Progress::Mode::kLines);
  EXPECT_EQ(Progress::PickMode(true, true, true), Progress::Mode::kLines);
  EXPECT_EQ(Progress::PickMode(false, true, false), Progress::Mode::kOff);
}

TEST(ProgressTest, PlainLinesUnderALauncherEvenOnATerminal) {
  EXPECT_EQ(Progress::PickMode(true, true, false, /*launched=*/true), Progress::Mode::kLines);
  // mpirun gives each rank a pty; its variables are what says so.
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  const Progress::Mode under_mpirun = Progress::PickMode(true, true, false);
  unsetenv("OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(under_mpirun, Progress::Mode::kLines);
  EXPECT_EQ(Progress::PickMode(true, true, false), Progress::Mode::kBar);
}

TEST(ProgressTest, BarRedrawsOneLineWithStepEtaLossAndThroughput) {
  const std::string out = Capture([](FILE* f) {
    Progress p(Progress::Mode::kBar, 100, f);
    p.Update(1, 4.5, 900, 2.0);
    p.Update(50, 2.31041, 41234, 100.0);
    p.Message("step 50 | val_loss 2.4");
    p.Update(51, 2.3, 41000, 102.0);
    p.Finish();
  });
  // No line breaks between updates: each starts with a carriage return.
  EXPECT_TRUE(absl::StrContains(out,
                                "\r[##########..........]  50/100  50% | eta 1m40s | "
                                "loss 2.3104 | 41.2k tok/s\033[K"))
      << out;
  EXPECT_TRUE(absl::StrContains(out, "\r\033[Kstep 50 | val_loss 2.4\n")) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << out;  // the message and Finish
  EXPECT_TRUE(absl::EndsWith(out, "\n"));
}

TEST(ProgressTest, PlainModeWritesWholeLinesAboutEveryTenthOfTheRun) {
  const std::string out = Capture([](FILE* f) {
    Progress p(Progress::Mode::kLines, 100, f);
    for (int s = 1; s <= 100; ++s) p.Update(s, 3.0, 1000, s * 0.5);
    p.Finish();
  });
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_EQ(out.find('\033'), std::string::npos);
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 11u);  // step 1 and every 10th
  EXPECT_TRUE(absl::StartsWith(lines[0], "progress [")) << lines[0];
  EXPECT_TRUE(absl::StrContains(lines.back(), "100/100 100% | eta 0s")) << lines.back();
}

TEST(ProgressTest, FormatsDurations) {
  EXPECT_EQ(Progress::FormatDuration(12.4), "12s");
  EXPECT_EQ(Progress::FormatDuration(187), "3m07s");
  EXPECT_EQ(Progress::FormatDuration(3720), "1h02m");
  EXPECT_EQ(Progress::FormatDuration(NAN), "?");
}

}  // namespace
}  // namespace weft
