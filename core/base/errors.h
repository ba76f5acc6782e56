// User-facing error construction: every message says what was wrong, what was
// expected, and a hint, in the same order, so users learn where to look.
#ifndef WEFT_CORE_BASE_ERRORS_H_
#define WEFT_CORE_BASE_ERRORS_H_

#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace weft {

// "<what>; expected <expected>. Hint: <hint>" (empty parts are left out).
absl::Status MakeError(absl::StatusCode code, absl::string_view what,
                       absl::string_view expected, absl::string_view hint);

inline absl::Status InvalidArgument(absl::string_view what, absl::string_view expected,
                                    absl::string_view hint = "") {
  return MakeError(absl::StatusCode::kInvalidArgument, what, expected, hint);
}

inline absl::Status FailedPrecondition(absl::string_view what, absl::string_view expected,
                                       absl::string_view hint = "") {
  return MakeError(absl::StatusCode::kFailedPrecondition, what, expected, hint);
}

inline absl::Status NotFound(absl::string_view what, absl::string_view expected,
                             absl::string_view hint = "") {
  return MakeError(absl::StatusCode::kNotFound, what, expected, hint);
}

inline absl::Status Unavailable(absl::string_view what, absl::string_view expected,
                                absl::string_view hint = "") {
  return MakeError(absl::StatusCode::kUnavailable, what, expected, hint);
}

inline absl::Status Internal(absl::string_view what, absl::string_view expected = "",
                             absl::string_view hint = "") {
  return MakeError(absl::StatusCode::kInternal, what, expected, hint);
}

inline absl::Status DeadlineExceeded(absl::string_view what, absl::string_view expected,
                                     absl::string_view hint = "") {
  return MakeError(absl::StatusCode::kDeadlineExceeded, what, expected, hint);
}

// Prefixes a status message with context ("loading shard x: <msg>").
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace weft

#endif  // WEFT_CORE_BASE_ERRORS_H_
