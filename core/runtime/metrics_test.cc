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
