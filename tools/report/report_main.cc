// bazel run //tools:report -- --metrics=run.jsonl[,more.jsonl] --out=report.html
//
// Writes one self-contained HTML report of training runs' metrics
// (--metrics_out files); several runs are overlaid for comparison.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "tools/report/report_html.h"
#include "tools/train_main/train_main.h"

int main(int argc, char** argv) {
  std::vector<std::string> metrics;
  std::string out = "report.html";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (absl::StartsWith(a, "--metrics=")) {
      for (absl::string_view p : absl::StrSplit(a.substr(10), ',', absl::SkipEmpty())) {
        metrics.push_back(weft::ResolveUserPath(std::string(p)));
      }
    } else if (absl::StartsWith(a, "--out=")) {
      out = a.substr(6);
    } else {
      std::fprintf(stderr,
                   "usage: report --metrics=run.jsonl[,more.jsonl] [--out=report.html]\n"
                   "unknown argument '%s'\n",
                   a.c_str());
      return 2;
    }
  }
  out = weft::ResolveUserPath(out);
  absl::Status s = weft::report::WriteReport(metrics, out);
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::printf("report: %zu run(s) -> %s\n", metrics.size(), out.c_str());
  return 0;
}
