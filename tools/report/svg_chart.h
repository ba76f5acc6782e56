// SVG charts written as text, so a report is one self-contained file that
// any browser shows without scripts or network: line charts (several runs
// overlaid) and horizontal stacked bars (a step's parts per run).
#ifndef WEFT_TOOLS_REPORT_SVG_CHART_H_
#define WEFT_TOOLS_REPORT_SVG_CHART_H_

#include <string>
#include <vector>

#include "tools/report/run_metrics.h"

namespace weft::report {

struct ChartSpec {
  std::string title;
  std::string x_label;
  std::string y_label;
  // Shown inside the plot when no series has a point (e.g. why MFU is empty).
  std::string empty_note = "no data in these runs";
};

struct LineSeries {
  std::string label;
  std::string color;  // CSS color
  bool dashed = false;
  Series points;
};

struct BarSegment {
  std::string label;
  std::string color;
  double value = 0;
};

struct StackedBar {
  std::string label;
  std::vector<BarSegment> segments;
};

std::string LineChart(const ChartSpec& spec, const std::vector<LineSeries>& series);
std::string StackedBarChart(const ChartSpec& spec, const std::vector<StackedBar>& bars);

// About `target` round tick values covering [lo, hi] (1, 2 or 5 x 10^k apart).
std::vector<double> NiceTicks(double lo, double hi, int target);
// "0.25", "1.5k", "3M": short labels for axes.
std::string FormatTick(double v);
// Escapes text for HTML and SVG.
std::string XmlEscape(const std::string& s);

}  // namespace weft::report

#endif  // WEFT_TOOLS_REPORT_SVG_CHART_H_
