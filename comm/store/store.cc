#include "comm/store/store.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"

namespace weft::comm {

absl::Status StoreTimeoutError(absl::string_view store_description,
                               absl::Span<const std::string> requested,
                               absl::Span<const std::string> missing, absl::Duration timeout) {
  return DeadlineExceeded(
      absl::StrCat(store_description, ": timed out after ", absl::FormatDuration(timeout),
                   " waiting for key(s) [", absl::StrJoin(missing, ", "), "] (asked for [",
                   absl::StrJoin(requested, ", "), "])"),
      "another rank to set them before the timeout",
      "a rank that should set these keys may have crashed, not started yet, or be using a "
      "different store address/prefix; check its log, or raise the timeout if startup is slow");
}

absl::StatusOr<int64_t> ParseCounter(absl::string_view key, absl::string_view value) {
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n)) {
    return InvalidArgument(
        absl::StrCat("store key '", key, "' holds '", value.substr(0, 32),
                     "', which Add cannot increment"),
        "a decimal integer (as written by Add) or a missing key",
        "use separate keys for counters and for other values");
  }
  return n;
}

}  // namespace weft::comm
