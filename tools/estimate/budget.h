// Memory sizes on the command line: "80GiB", "512MiB", "1.5GB", "1048576".
#ifndef WEFT_TOOLS_ESTIMATE_BUDGET_H_
#define WEFT_TOOLS_ESTIMATE_BUDGET_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft {

// Bytes in `text`: a number with an optional unit (B, KiB, MiB, GiB, TiB,
// or KB, MB, GB, TB as powers of 1000; K, M, G, T as binary). A bare
// number below 1 MiB is refused as missing its unit ("80" meant 80 GiB).
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

// "12.3 MiB": sizes in the estimate tool's tables and the planner's lines.
std::string FormatMiB(int64_t bytes);

}  // namespace weft

#endif  // WEFT_TOOLS_ESTIMATE_BUDGET_H_
