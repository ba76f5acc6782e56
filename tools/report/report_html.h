// The run report: one self-contained HTML page (inline CSS and SVG, no
// scripts, no links) with loss and val loss, throughput and MFU, the step
// breakdown, memory, GPU utilisation and communication, every run of
// `runs` overlaid in its own color, and each run's config.
#ifndef WEFT_TOOLS_REPORT_REPORT_HTML_H_
#define WEFT_TOOLS_REPORT_REPORT_HTML_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tools/report/run_metrics.h"

namespace weft::report {

// The charts' titles, in page order (tests look for one <svg> each).
const std::vector<std::string>& ChartTitles();

std::string BuildReportHtml(const std::vector<RunMetrics>& runs);

// Reads each metrics file and writes the report to `out`.
absl::Status WriteReport(const std::vector<std::string>& metrics_paths, const std::string& out);

}  // namespace weft::report

#endif  // WEFT_TOOLS_REPORT_REPORT_HTML_H_
