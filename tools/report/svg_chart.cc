#include "tools/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weft::report {
namespace {

constexpr double kWidth = 640, kHeight = 300;
constexpr double kLeft = 64, kRight = 16, kTop = 34, kBottom = 64;
// Lines with more points than this are thinned (every k-th point), which
// keeps a 100k-step run's report small without changing its shape.
constexpr size_t kMaxPoints = 1500;

std::string Open(const ChartSpec& spec) {
  return absl::StrFormat(
      "<svg class=\"chart\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "role=\"img\" aria-label=\"%s\">\n"
      "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>\n"
      "<text x=\"%.0f\" y=\"20\" font-size=\"15\" font-weight=\"bold\">%s</text>\n",
      kWidth, kHeight, kWidth, kHeight, XmlEscape(spec.title), kWidth, kHeight, kLeft,
      XmlEscape(spec.title));
}

std::string EmptyNote(const ChartSpec& spec) {
  return absl::StrFormat(
      "<text x=\"%.0f\" y=\"%.0f\" font-size=\"13\" fill=\"#777\" text-anchor=\"middle\">%s"
      "</text>\n</svg>\n",
      kWidth / 2, kHeight / 2, XmlEscape(spec.empty_note));
}

}  // namespace

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  // From the multiple of step at or below lo to the one at or above hi.
  const int64_t first = static_cast<int64_t>(std::floor(lo / step + 1e-9));
  const int64_t last = static_cast<int64_t>(std::ceil(hi / step - 1e-9));
  std::vector<double> ticks;
  for (int64_t i = first; i <= last; ++i) ticks.push_back(static_cast<double>(i) * step);
  return ticks;
}

std::string FormatTick(double v) {
  const double a = std::fabs(v);
  if (a >= 1e9) return absl::StrFormat("%gG", v / 1e9);
  if (a >= 1e6) return absl::StrFormat("%gM", v / 1e6);
  if (a >= 1e4) return absl::StrFormat("%gk", v / 1e3);
  return absl::StrFormat("%g", v);
}

std::string LineChart(const ChartSpec& spec, const std::vector<LineSeries>& series) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const LineSeries& s : series) {
    for (const auto& [x, y] : s.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  std::string svg = Open(spec);
  if (!std::isfinite(x0)) return svg + EmptyNote(spec);
  // Non-negative quantities read best from zero; losses from their range.
  if (y0 > 0 && y0 < 0.5 * y1) y0 = 0;
  const std::vector<double> xt = NiceTicks(x0, x1, 6), yt = NiceTicks(y0, y1, 5);
  x0 = std::min(x0, xt.front()), x1 = std::max(x1, xt.back());
  y0 = std::min(y0, yt.front()), y1 = std::max(y1, yt.back());
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * pw; };
  auto py = [&](double y) { return kTop + ph - (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5) * ph; };
  for (double t : yt) {
    absl::StrAppendFormat(
        &svg,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s"
        "</text>\n",
        kLeft, py(t), kLeft + pw, py(t), kLeft - 6, py(t) + 4, FormatTick(t));
  }
  for (double t : xt) {
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%s"
                          "</text>\n",
                          px(t), kTop + ph, px(t), kTop + ph + 4, px(t), kTop + ph + 17,
                          FormatTick(t));
  }
  absl::StrAppendFormat(&svg,
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                        "stroke=\"#999\"/>\n"
                        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">%s"
                        "</text>\n"
                        "<text x=\"14\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" "
                        "transform=\"rotate(-90 14 %.1f)\">%s</text>\n",
                        kLeft, kTop, pw, ph, kLeft + pw / 2, kTop + ph + 34,
                        XmlEscape(spec.x_label), kTop + ph / 2, kTop + ph / 2,
                        XmlEscape(spec.y_label));
  double legend_x = kLeft;
  for (const LineSeries& s : series) {
    if (s.points.empty()) continue;
    const size_t stride = (s.points.size() + kMaxPoints - 1) / kMaxPoints;
    std::string pts;
    for (size_t i = 0; i < s.points.size(); i += stride) {
      absl::StrAppendFormat(&pts, "%.1f,%.1f ", px(s.points[i].first), py(s.points[i].second));
    }
    if ((s.points.size() - 1) % stride != 0) {
      absl::StrAppendFormat(&pts, "%.1f,%.1f", px(s.points.back().first),
                            py(s.points.back().second));
    }
    // A single point would draw nothing as a line: mark it.
    if (s.points.size() == 1) {
      absl::StrAppendFormat(&svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
                            px(s.points[0].first), py(s.points[0].second), s.color);
    }
    absl::StrAppendFormat(&svg,
                          "<polyline class=\"series\" fill=\"none\" stroke=\"%s\" "
                          "stroke-width=\"1.6\"%s points=\"%s\"><title>%s</title></polyline>\n",
                          s.color, s.dashed ? " stroke-dasharray=\"5 3\"" : "", pts,
                          XmlEscape(s.label));
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                          "stroke-width=\"2\"%s/><text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">%s"
                          "</text>\n",
                          legend_x, kHeight - 10, legend_x + 18, kHeight - 10, s.color,
                          s.dashed ? " stroke-dasharray=\"5 3\"" : "", legend_x + 22, kHeight - 6,
                          XmlEscape(s.label));
    legend_x += 30 + 6.5 * static_cast<double>(s.label.size());
  }
  return svg + "</svg>\n";
}

std::string StackedBarChart(const ChartSpec& spec, const std::vector<StackedBar>& bars) {
  double total_max = 0;
  for (const StackedBar& b : bars) {
    double t = 0;
    for (const BarSegment& s : b.segments) t += std::max(0.0, s.value);
    total_max = std::max(total_max, t);
  }
  std::string svg = Open(spec);
  if (bars.empty() || total_max <= 0) return svg + EmptyNote(spec);
  const double left = 150;
  const double pw = kWidth - left - kRight, ph = kHeight - kTop - kBottom;
  const std::vector<double> ticks = NiceTicks(0, total_max, 5);
  const double xmax = ticks.back();
  auto px = [&](double v) { return left + v / xmax * pw; };
  for (double t : ticks) {
    absl::StrAppendFormat(
        &svg,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%s"
        "</text>\n",
        px(t), kTop, px(t), kTop + ph, px(t), kTop + ph + 15, FormatTick(t));
  }
  const double slot = ph / static_cast<double>(bars.size());
  const double bh = std::min(36.0, slot * 0.7);
  for (size_t i = 0; i < bars.size(); ++i) {
    const double y = kTop + slot * static_cast<double>(i) + (slot - bh) / 2;
    absl::StrAppendFormat(&svg,
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">%s"
                          "</text>\n",
                          left - 6, y + bh / 2 + 4, XmlEscape(bars[i].label));
    double at = 0;
    for (const BarSegment& s : bars[i].segments) {
      if (s.value <= 0) continue;
      absl::StrAppendFormat(&svg,
                            "<rect class=\"segment\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                            "height=\"%.1f\" fill=\"%s\"><title>%s: %.3g</title></rect>\n",
                            px(at), y, px(at + s.value) - px(at), bh, s.color, XmlEscape(s.label),
                            s.value);
      at += s.value;
    }
  }
  absl::StrAppendFormat(&svg,
                        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">%s"
                        "</text>\n",
                        left + pw / 2, kTop + ph + 32, XmlEscape(spec.x_label));
  double legend_x = 12;
  for (const BarSegment& s : bars[0].segments) {
    absl::StrAppendFormat(&svg,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">%s</text>\n",
                          legend_x, kHeight - 18, s.color, legend_x + 16, kHeight - 8,
                          XmlEscape(s.label));
    legend_x += 26 + 6.5 * static_cast<double>(s.label.size());
  }
  return svg + "</svg>\n";
}

}  // namespace weft::report
