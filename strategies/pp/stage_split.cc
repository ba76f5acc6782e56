#include "strategies/pp/stage_split.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"

namespace weft::pp {
namespace {

absl::Status CheckParts(int num_stages, int parts) {
  if (parts < 1 || num_stages < parts) {
    return InvalidArgument(absl::StrCat("a split of ", num_stages, " stages into ", parts, " parts"),
                           "at least one stage per part (--pp x --pp_virtual_stages <= stages)",
                           "use fewer pipeline ranks or virtual stages");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int>> SplitByCount(int num_stages, int parts) {
  if (absl::Status s = CheckParts(num_stages, parts); !s.ok()) return s;
  std::vector<int> bounds = {0};
  for (int i = 0; i < parts; ++i) {
    bounds.push_back(bounds.back() + num_stages / parts + (i < num_stages % parts ? 1 : 0));
  }
  return bounds;
}

absl::StatusOr<std::vector<int>> SplitByCost(const std::vector<double>& costs, int parts) {
  const int n = static_cast<int>(costs.size());
  if (absl::Status s = CheckParts(n, parts); !s.ok()) return s;
  for (double c : costs) {
    if (!(c >= 0)) return InvalidArgument(absl::StrCat("a stage cost of ", c), "costs >= 0");
  }
  std::vector<double> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  // best[k][i]: the smallest possible largest part when splitting the first
  // i stages into k parts; cut[k][i] where the last part starts.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(parts + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(parts + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= parts; ++k) {
    for (int i = k; i <= n; ++i) {
      for (int j = k - 1; j < i; ++j) {
        const double v = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (v < best[k][i]) {  // strict: ties keep the earliest cut
          best[k][i] = v;
          cut[k][i] = j;
        }
      }
    }
  }
  std::vector<int> bounds(parts + 1, n);
  for (int k = parts, i = n; k > 0; --k) {
    i = cut[k][i];
    bounds[k - 1] = i;
  }
  return bounds;
}

std::string DescribeSplit(const std::vector<std::string>& names, const std::vector<double>& costs,
                          const std::vector<int>& bounds) {
  std::vector<std::string> parts;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    double cost = 0;
    for (int s = bounds[i]; s < bounds[i + 1]; ++s) cost += costs[s];
    const std::string range = bounds[i + 1] - bounds[i] == 1
                                  ? names[bounds[i]]
                                  : absl::StrCat(names[bounds[i]], "..", names[bounds[i + 1] - 1]);
    parts.push_back(absl::StrFormat("part %d: %s (%d stage%s, cost %.4g)", i, range,
                                    bounds[i + 1] - bounds[i],
                                    bounds[i + 1] - bounds[i] == 1 ? "" : "s", cost));
  }
  return absl::StrJoin(parts, " | ");
}

}  // namespace weft::pp
