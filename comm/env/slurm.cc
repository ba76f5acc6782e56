#include "comm/env/slurm.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"

namespace weft::comm {
namespace {

absl::Status BadNodelist(absl::string_view nodelist, absl::string_view why) {
  return InvalidArgument(absl::StrCat("cannot parse Slurm nodelist '", nodelist, "': ", why),
                         "host names with optional [a-b,c] ranges, e.g. node[01-03,07]",
                         "set MASTER_ADDR to the first node's name to skip parsing");
}

// Splits on commas that are not inside brackets.
std::vector<std::string> SplitTopLevel(absl::string_view text) {
  std::vector<std::string> parts;
  int depth = 0;
  std::string current;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  parts.push_back(current);
  return parts;
}

// "01-03,7" -> {"01", "02", "03", "7"}.
absl::StatusOr<std::vector<std::string>> ExpandRanges(absl::string_view nodelist,
                                                      absl::string_view ranges) {
  std::vector<std::string> out;
  for (absl::string_view piece : absl::StrSplit(ranges, ',')) {
    std::pair<absl::string_view, absl::string_view> bounds = absl::StrSplit(piece, '-');
    if (bounds.second.empty()) bounds.second = bounds.first;
    int64_t lo = 0, hi = 0;
    if (bounds.first.empty() || !absl::SimpleAtoi(bounds.first, &lo) ||
        !absl::SimpleAtoi(bounds.second, &hi) || lo < 0) {
      return BadNodelist(nodelist, absl::StrCat("bad range '", piece, "'"));
    }
    if (hi < lo || hi - lo > 100000) {
      return BadNodelist(nodelist, absl::StrCat("range '", piece, "' is empty or huge"));
    }
    const size_t width = bounds.first.size();
    for (int64_t v = lo; v <= hi; ++v) {
      std::string digits = absl::StrCat(v);
      if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
      out.push_back(digits);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandSlurmNodelist(absl::string_view nodelist) {
  std::vector<std::string> hosts;
  for (const std::string& item : SplitTopLevel(nodelist)) {
    if (item.empty()) return BadNodelist(nodelist, "empty host name");
    // Expand bracket groups left to right as a cartesian product.
    std::vector<std::string> partial = {""};
    size_t pos = 0;
    while (pos < item.size()) {
      const size_t open = item.find('[', pos);
      const std::string literal = item.substr(pos, open == std::string::npos ? open : open - pos);
      if (literal.find(']') != std::string::npos) return BadNodelist(nodelist, "stray ']'");
      for (std::string& p : partial) p += literal;
      if (open == std::string::npos) break;
      const size_t close = item.find(']', open);
      if (close == std::string::npos) return BadNodelist(nodelist, "unclosed '['");
      auto values = ExpandRanges(nodelist, absl::string_view(item).substr(open + 1, close - open - 1));
      if (!values.ok()) return values.status();
      std::vector<std::string> next;
      for (const std::string& p : partial) {
        for (const std::string& v : *values) next.push_back(p + v);
      }
      partial = std::move(next);
      pos = close + 1;
    }
    hosts.insert(hosts.end(), partial.begin(), partial.end());
  }
  return hosts;
}

absl::StatusOr<std::vector<int>> ExpandSlurmTaskCounts(absl::string_view counts) {
  std::vector<int> out;
  for (absl::string_view piece : absl::StrSplit(counts, ',')) {
    int count = 0, repeat = 1;
    const size_t paren = piece.find("(x");
    bool ok = true;
    if (paren == absl::string_view::npos) {
      ok = absl::SimpleAtoi(piece, &count);
    } else {
      ok = absl::SimpleAtoi(piece.substr(0, paren), &count) && piece.back() == ')' &&
           absl::SimpleAtoi(piece.substr(paren + 2, piece.size() - paren - 3), &repeat);
    }
    if (!ok || count < 0 || repeat < 1) {
      return InvalidArgument(absl::StrCat("cannot parse Slurm task counts '", counts, "'"),
                             "a list like 2(x3),1");
    }
    out.insert(out.end(), repeat, count);
  }
  return out;
}

}  // namespace weft::comm
