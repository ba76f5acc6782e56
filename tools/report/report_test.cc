#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tools/report/report_html.h"
#include "tools/report/run_metrics.h"
#include "tools/report/svg_chart.h"

namespace weft::report {
namespace {

// A run's metrics as the trainer writes them: config, steps, an eval,
// GPU samples (when `gpu`).
std::string Jsonl(double loss0, bool gpu, double comm) {
  std::string out =
      "{\"config\":\"device: \\\"cpu\\\" steps: 6 parallel { strategy: \\\"a<b\\\" }\"}\n";
  for (int s = 1; s <= 6; ++s) {
    absl::StrAppend(
        &out, "{\"step\":", s, ",\"loss\":", loss0 - 0.2 * s,
        ",\"step_ms\":20,\"tokens_per_s\":", 1000 + 10 * s,
        ",\"mfu\":null,\"peak_mem_mb\":", 10 + s,
        ",\"data_wait_ms\":1,\"forward_ms\":6,\"backward_ms\":9,\"exposed_comm_ms\":", comm,
        ",\"optimizer_ms\":2,\"other_ms\":", 2 - comm / 2, ",\"comm_mb\":", comm * 3, "}\n");
    if (gpu) {
      absl::StrAppend(&out, "{\"step\":", s, ",\"time_s\":", s * 0.5,
                      ",\"gpu\":0,\"gpu_util\":", 80 + s, ",\"gpu_mem_mb\":1200}\n");
    }
  }
  absl::StrAppend(&out, "{\"step\":6,\"val_loss\":", loss0 - 1, "}\n");
  return out;
}

std::vector<RunMetrics> TwoRuns() {
  return {*ParseRunMetrics(Jsonl(4.0, true, 0), "single"),
          *ParseRunMetrics(Jsonl(4.1, false, 1.5), "ddp x2")};
}

TEST(RunMetricsTest, SplitsStepsSamplesAndConfigAndSkipsNulls) {
  absl::StatusOr<RunMetrics> r = ParseRunMetrics(Jsonl(4.0, true, 0), "run");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->Step("loss")->size(), 6u);
  EXPECT_DOUBLE_EQ(r->Step("loss")->front().second, 3.8);
  EXPECT_EQ(r->Step("mfu"), nullptr);  // every value null
  EXPECT_EQ(r->Step("val_loss")->size(), 1u);
  ASSERT_NE(r->Time("gpu_util"), nullptr);
  EXPECT_DOUBLE_EQ(r->Time("gpu_util")->at(1).first, 1.0);  // time_s, not step
  EXPECT_EQ(r->Step("gpu_util"), nullptr);
  EXPECT_TRUE(absl::StartsWith(r->config, "device: \"cpu\""));
}

TEST(RunMetricsTest, ABrokenLineNamesItsNumber) {
  absl::StatusOr<RunMetrics> r = ParseRunMetrics("{\"step\":1}\n{\"step\":2,\n", "run");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "line 2")) << r.status();
}

TEST(RunMetricsTest, LabelsTellFilesOfTheSameNameApart) {
  EXPECT_EQ(RunLabels({"/x/a/m.jsonl", "/x/b/m.jsonl", "/y/c.jsonl"}),
            (std::vector<std::string>{"a/m", "b/m", "c"}));
  EXPECT_EQ(RunLabels({"/r/m.jsonl", "/q/r/m.jsonl"}),
            (std::vector<std::string>{"/r/m", "/q/r/m"}));
  EXPECT_EQ(RunLabels({"m.jsonl", "m.jsonl"}), (std::vector<std::string>{"m", "m (2)"}));
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(testing::TempDir(), "/", name);
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
  return path;
}

TEST(ReportTest, RunsFromFilesOfTheSameNameGetDistinctHeadings) {
  const std::string a = WriteFile("a/m.jsonl", Jsonl(4.0, false, 0));
  const std::string b = WriteFile("b/m.jsonl", Jsonl(4.1, false, 0));
  const std::string out = absl::StrCat(testing::TempDir(), "/same_name.html");
  ASSERT_TRUE(WriteReport({a, b}, out).ok());
  std::stringstream html;
  html << std::ifstream(out).rdbuf();
  EXPECT_TRUE(absl::StrContains(html.str(), "<h3>a/m</h3>")) << html.str();
  EXPECT_TRUE(absl::StrContains(html.str(), "<h3>b/m</h3>"));
}

TEST(ReportTest, AnEmptyMetricsFileIsAnErrorNamingIt) {
  const std::string empty = WriteFile("empty.jsonl", "\n");
  const absl::Status s =
      WriteReport({empty}, absl::StrCat(testing::TempDir(), "/empty.html"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), empty)) << s;
}

TEST(SvgChartTest, TicksAreRoundAndCoverTheRange) {
  EXPECT_EQ(NiceTicks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  const std::vector<double> t = NiceTicks(3.71, 4.93, 5);
  EXPECT_LE(t.front(), 3.71);
  EXPECT_GE(t.back(), 4.93);
  EXPECT_NEAR(t[1] - t[0], 0.5, 1e-12);  // 1.22 / 5 rounds up to 0.5
  EXPECT_EQ(t.size(), 4u);               // 3.5 4 4.5 5
  EXPECT_EQ(FormatTick(41000), "41k");
  EXPECT_EQ(FormatTick(0.25), "0.25");
}

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// The <svg> element titled `title`.
std::string ChartNamed(const std::string& html, const std::string& title) {
  const size_t at = html.find(absl::StrCat("aria-label=\"", title, "\""));
  if (at == std::string::npos) return "";
  const size_t begin = html.rfind("<svg", at);
  return html.substr(begin, html.find("</svg>", at) - begin);
}

TEST(ReportTest, OneSvgPerChartAndNothingFetchedFromTheNetwork) {
  const std::string html = BuildReportHtml(TwoRuns());
  EXPECT_EQ(Count(html, "<svg"), static_cast<int>(ChartTitles().size()));
  for (const std::string& title : ChartTitles()) {
    EXPECT_FALSE(ChartNamed(html, title).empty()) << title;
  }
  for (const char* external : {"http:", "https:", "<script", "src=", "url(", "@import", "<link"}) {
    EXPECT_FALSE(absl::StrContains(html, external)) << external;
  }
  // The config is shown, escaped.
  EXPECT_TRUE(absl::StrContains(html, "strategy: &quot;a&lt;b&quot;")) << html;
}

TEST(ReportTest, RunsAreOverlaidInTheirOwnColorsWithinThePlot) {
  const std::string loss = ChartNamed(BuildReportHtml(TwoRuns()), "Loss");
  // Training and validation loss of both runs.
  for (const char* label : {"<title>single</title>", "<title>ddp x2</title>",
                            "<title>single (val)</title>", "<title>ddp x2 (val)</title>"}) {
    EXPECT_TRUE(absl::StrContains(loss, label)) << label;
  }
  std::regex polyline(
      "<polyline class=\"series\" fill=\"none\" stroke=\"(#[0-9A-F]+)\"[^>]*"
      "points=\"([^\"]*)\"><title>(single|ddp x2)</title>");
  std::map<std::string, std::string> color_of;
  for (std::sregex_iterator it(loss.begin(), loss.end(), polyline), end; it != end; ++it) {
    color_of[(*it)[3]] = (*it)[1];
    int points = 0;
    for (absl::string_view xy : absl::StrSplit((*it)[2].str(), ' ', absl::SkipEmpty())) {
      std::vector<std::string> p = absl::StrSplit(xy, ',');
      double x = 0, y = 0;
      ASSERT_TRUE(p.size() == 2 && absl::SimpleAtod(p[0], &x) && absl::SimpleAtod(p[1], &y));
      EXPECT_TRUE(x >= 0 && x <= 640 && y >= 0 && y <= 300) << xy;
      ++points;
    }
    EXPECT_EQ(points, 6);
  }
  ASSERT_EQ(color_of.size(), 2u);
  EXPECT_NE(color_of["single"], color_of["ddp x2"]);
}

TEST(ReportTest, BreakdownHasABarPerRunAndEmptyChartsSayWhy) {
  const std::string html = BuildReportHtml(TwoRuns());
  const std::string bars = ChartNamed(html, "Step breakdown");
  EXPECT_EQ(Count(bars, "<title>forward: 6</title>"), 2);
  EXPECT_EQ(Count(bars, "<title>exposed_comm: 1.5</title>"), 1);  // only ddp communicates
  EXPECT_TRUE(absl::StrContains(ChartNamed(html, "MFU"), "the device peak is unknown"));
  // GPU samples of the one run that has them.
  EXPECT_EQ(Count(ChartNamed(html, "GPU utilisation"), "<polyline"), 1);
}

}  // namespace
}  // namespace weft::report
