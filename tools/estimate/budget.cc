#include "tools/estimate/budget.h"

#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/errors.h"

namespace weft {

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  static const std::pair<const char*, double> kUnits[] = {
      {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
      {"kb", 1e3},     {"mb", 1e6},        {"gb", 1e9},           {"tb", 1e12},
      {"k", 1024.0},   {"m", 1048576.0},   {"g", 1073741824.0},   {"t", 1099511627776.0},
      {"b", 1.0}};
  std::string s = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  double scale = 1;
  for (const auto& [suffix, factor] : kUnits) {
    const std::string u = suffix;
    if (s.size() > u.size() && s.compare(s.size() - u.size(), u.size(), u) == 0) {
      s.resize(s.size() - u.size());
      scale = factor;
      break;
    }
  }
  double value = 0;
  if (!absl::SimpleAtod(s, &value) || !(value > 0) || !std::isfinite(value)) {
    return InvalidArgument(absl::StrCat("memory size '", text, "'"),
                           "a positive number with an optional unit",
                           "e.g. --memory_budget=80GiB, 512MiB or 1.5GB");
  }
  // "--memory_budget=80" meant 80 GiB, not 80 bytes: a bare number is
  // bytes, and below a MiB it is surely missing its unit.
  const bool has_unit = scale != 1 || absl::EndsWithIgnoreCase(text, "b");
  if (!has_unit && value < 1048576) {
    return InvalidArgument(absl::StrCat("memory size '", text, "' without a unit: ", text, " bytes"),
                           "a size with its unit (a bare number is bytes)",
                           absl::StrCat("e.g. --memory_budget=", text, "GiB or ", text, "MiB"));
  }
  return static_cast<int64_t>(value * scale);
}

std::string FormatMiB(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace weft
