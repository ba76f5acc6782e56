#include "tools/report/report_html.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "tools/report/svg_chart.h"

namespace weft::report {
namespace {

// Distinct on white and for common color blindness (Okabe-Ito).
constexpr const char* kRunColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                      "#E69F00", "#56B4E9", "#000000", "#F0E442"};
constexpr const char* kPartColors[] = {"#999999", "#0072B2", "#56B4E9",
                                       "#D55E00", "#009E73", "#E69F00"};
constexpr const char* kParts[] = {"data_wait",    "forward",   "backward",
                                  "exposed_comm", "optimizer", "other"};

const char* RunColor(size_t i) { return kRunColors[i % std::size(kRunColors)]; }

// One line per run for step key `key` (label suffixed when `suffix` set).
std::vector<LineSeries> PerRun(const std::vector<RunMetrics>& runs, const std::string& key,
                               bool by_time = false, const std::string& suffix = "",
                               bool dashed = false) {
  std::vector<LineSeries> out;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Series* s = by_time ? runs[i].Time(key) : runs[i].Step(key);
    if (s == nullptr) continue;
    out.push_back({runs[i].name + suffix, RunColor(i), dashed, *s});
  }
  return out;
}

// Mean of each part over a run's steps, leaving out step 1 (warm-up) when
// there are later ones.
StackedBar MeanBreakdown(const RunMetrics& run) {
  StackedBar bar{run.name, {}};
  for (size_t p = 0; p < std::size(kParts); ++p) {
    const Series* s = run.Step(absl::StrCat(kParts[p], "_ms"));
    double sum = 0;
    int n = 0;
    if (s != nullptr) {
      for (const auto& [step, v] : *s) {
        if (step == 1 && s->size() > 1) continue;
        sum += v;
        ++n;
      }
    }
    bar.segments.push_back({kParts[p], kPartColors[p], n > 0 ? sum / n : 0});
  }
  return bar;
}

void Section(std::string* html, const std::string& svg, const std::string& caption) {
  absl::StrAppend(html, "<figure>", svg, "<figcaption>", XmlEscape(caption),
                  "</figcaption></figure>\n");
}

}  // namespace

const std::vector<std::string>& ChartTitles() {
  static const auto* titles = new std::vector<std::string>{"Loss",
                                                           "Throughput",
                                                           "MFU",
                                                           "Step breakdown",
                                                           "Memory",
                                                           "GPU utilisation",
                                                           "Exposed communication",
                                                           "Communication volume"};
  return *titles;
}

std::string BuildReportHtml(const std::vector<RunMetrics>& runs) {
  const std::vector<std::string>& t = ChartTitles();
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<title>weft run report</title>\n<style>\n"
      "body{font-family:sans-serif;margin:24px;color:#222;background:#fafafa}\n"
      "figure{display:inline-block;margin:8px;vertical-align:top;background:#fff;"
      "border:1px solid #ddd;padding:6px}\n"
      "figcaption{font-size:12px;color:#555;max-width:640px}\n"
      "pre{white-space:pre-wrap;background:#fff;border:1px solid #ddd;padding:8px;"
      "font-size:12px}\n"
      ".swatch{display:inline-block;width:12px;height:12px;margin-right:4px}\n"
      "</style></head><body>\n<h1>weft run report</h1>\n<p>";
  for (size_t i = 0; i < runs.size(); ++i) {
    absl::StrAppend(&html, "<span class=\"swatch\" style=\"background:", RunColor(i), "\"></span>",
                    XmlEscape(runs[i].name), " &nbsp; ");
  }
  html += "</p>\n";

  std::vector<LineSeries> loss = PerRun(runs, "loss");
  for (LineSeries& s : PerRun(runs, "val_loss", false, " (val)", true)) loss.push_back(s);
  Section(&html, LineChart({t[0], "step", "loss"}, loss),
          "Training loss per step (solid) and validation loss (dashed).");
  Section(&html, LineChart({t[1], "step", "tokens/s"}, PerRun(runs, "tokens_per_s")),
          "Tokens (targets) per second over the whole job.");
  Section(&html,
          LineChart({t[2], "step", "MFU",
                     "no MFU: the device peak is unknown (set "
                     "--peak_tflops on CPU)"},
                    PerRun(runs, "mfu")),
          "Model FLOPs utilisation: achieved training FLOP/s over the devices' peak.");
  std::vector<StackedBar> bars;
  for (const RunMetrics& r : runs) bars.push_back(MeanBreakdown(r));
  Section(&html, StackedBarChart({t[3], "mean ms per step (step 1 left out)", ""}, bars),
          "Where a step's time goes: the parts add up to step_ms. Exposed communication is "
          "the time compute waited for collectives.");
  std::vector<LineSeries> mem = PerRun(runs, "peak_mem_mb");
  for (LineSeries& s : PerRun(runs, "gpu_mem_mb", true, " (NVML, by seconds)", true)) {
    mem.push_back(s);
  }
  Section(&html, LineChart({t[4], "step", "MB"}, mem),
          "Peak bytes held by weft's allocator (solid). NVML's device memory, when sampled, "
          "is plotted dashed against seconds since the start.");
  Section(&html,
          LineChart({t[5], "seconds since start", "% busy",
                     "no GPU samples (CPU run, or NVML unavailable)"},
                    PerRun(runs, "gpu_util", true)),
          "GPU utilisation sampled through NVML (rank 0's GPU).");
  Section(&html,
          LineChart({t[6], "step", "ms", "no collectives (single process)"},
                    PerRun(runs, "exposed_comm_ms")),
          "Time per step that compute waited for communication.");
  Section(&html,
          LineChart({t[7], "step", "MB per step", "no collectives (single process)"},
                    PerRun(runs, "comm_mb")),
          "Payload of the collectives rank 0 waited on per step.");

  html += "<h2>Config</h2>\n";
  for (const RunMetrics& r : runs) {
    absl::StrAppend(&html, "<h3>", XmlEscape(r.name), "</h3>\n<pre>",
                    XmlEscape(r.config.empty() ? "(no config record in this file)" : r.config),
                    "</pre>\n");
  }
  return html + "</body></html>\n";
}

absl::Status WriteReport(const std::vector<std::string>& metrics_paths, const std::string& out) {
  if (metrics_paths.empty()) {
    return InvalidArgument("no metrics files", "--metrics=run.jsonl[,more.jsonl]");
  }
  std::vector<RunMetrics> runs;
  const std::vector<std::string> labels = RunLabels(metrics_paths);
  for (size_t i = 0; i < metrics_paths.size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(RunMetrics r, ReadRunMetrics(metrics_paths[i], labels[i]));
    runs.push_back(std::move(r));
  }
  const std::string html = BuildReportHtml(runs);
  FILE* f = std::fopen(out.c_str(), "w");
  if (f == nullptr) {
    return FailedPrecondition(absl::StrCat("cannot write report '", out, "'"),
                              "a writable path for --out / --report");
  }
  const bool ok = std::fwrite(html.data(), 1, html.size(), f) == html.size();
  if (std::fclose(f) != 0 || !ok) {
    return FailedPrecondition(absl::StrCat("writing report '", out, "' failed"), "disk space");
  }
  return absl::OkStatus();
}

}  // namespace weft::report
