#include "core/runtime/metrics.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(MetricsTest, JsonLinesAreWrittenAndParsableByEye) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/m.jsonl";
  {
    auto logger = MetricsLogger::Open(path, /*console=*/false, /*enabled=*/true);
    ASSERT_TRUE(logger.ok());
    logger->Log(MetricsLogger::Record().Add("step", 1).Add("loss", 2.5).Add("mfu", 0.123456789));
    logger->Log(MetricsLogger::Record().Add("step", 2).AddString("note", "eval"));
  }
  std::ifstream in(path);
  std::string l1, l2;
  std::getline(in, l1);
  std::getline(in, l2);
  EXPECT_EQ(l1, "{\"step\":1,\"loss\":2.5,\"mfu\":0.123456789}");
  EXPECT_EQ(l2, "{\"step\":2,\"note\":\"eval\"}");
}

TEST(MetricsTest, DisabledLoggerWritesNothing) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/none.jsonl";
  auto logger = MetricsLogger::Open(path, false, /*enabled=*/false);
  ASSERT_TRUE(logger.ok());
  logger->Log(MetricsLogger::Record().Add("step", 1));
  EXPECT_FALSE(std::ifstream(path).good());
}

// A resumed run continues the file: lines up to its step and those without
// a step stay, later steps (which it redoes) go. Before, it started the file
// afresh and the history before the resume was lost.
TEST(MetricsTest, AResumedRunKeepsTheHistoryUpToItsStep) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/resumed.jsonl";
  {
    auto logger = MetricsLogger::Open(path, false, true);
    ASSERT_TRUE(logger.ok());
    logger->Log(MetricsLogger::Record().AddString("config", "steps: 6"));
    for (int step = 1; step <= 5; ++step) {
      logger->Log(MetricsLogger::Record().Add("step", step).Add("loss", 3.0 - step * 0.1));
    }
    logger->Log(MetricsLogger::Record().Add("step", 4).Add("val_loss", 2.9));
  }
  {
    auto logger = MetricsLogger::Open(path, false, true, /*resumed_at=*/3);
    ASSERT_TRUE(logger.ok());
    logger->Log(MetricsLogger::Record().Add("step", 4).Add("loss", 2.65));
  }
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], "{\"config\":\"steps: 6\"}");
  EXPECT_EQ(lines[1], "{\"step\":1,\"loss\":2.9}");
  EXPECT_EQ(lines[3], "{\"step\":3,\"loss\":2.7}");
  EXPECT_EQ(lines[4], "{\"step\":4,\"loss\":2.65}");
  // A new run (no resume) starts afresh.
  ASSERT_TRUE(MetricsLogger::Open(path, false, true).ok());
  EXPECT_EQ(std::ifstream(path).peek(), std::ifstream::traits_type::eof());
}

TEST(MetricsTest, UnwritablePathIsAnError) {
  EXPECT_FALSE(MetricsLogger::Open("/nonexistent/dir/m.jsonl", false, true).ok());
}

TEST(MetricsTest, NonFiniteNumbersBecomeNull) {
  EXPECT_EQ(MetricsLogger::ToJson(MetricsLogger::Record().Add("loss", 1.0 / 0.0)),
            "{\"loss\":null}");
}

TEST(MetricsTest, StringsAreEscapedSoEveryLineStaysJson) {
  EXPECT_EQ(MetricsLogger::ToJson(MetricsLogger::Record().AddString("config", "a \"b\"\nc")),
            "{\"config\":\"a \\\"b\\\"\\nc\"}");
}

TEST(MetricsTest, ConsoleLinesGoToTheSinkUnlessFileOnly) {
  auto logger = MetricsLogger::Open("", /*console=*/true, /*enabled=*/true);
  ASSERT_TRUE(logger.ok());
  std::vector<std::string> lines;
  logger->set_console_sink([&](const std::string& l) { lines.push_back(l); });
  logger->Log(MetricsLogger::Record().Add("step", 3).Add("loss", 2.5));
  logger->Log(MetricsLogger::Record().Add("step", 4), /*to_console=*/false);
  logger->Print("note");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "step 3 | loss 2.5");
  EXPECT_EQ(lines[1], "note");
}

}  // namespace
}  // namespace weft
