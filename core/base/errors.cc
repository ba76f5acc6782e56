#include "core/base/errors.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace weft {

absl::Status MakeError(absl::StatusCode code, absl::string_view what,
                       absl::string_view expected, absl::string_view hint) {
  std::string msg(what);
  if (!expected.empty()) absl::StrAppend(&msg, "; expected ", expected);
  if (!hint.empty()) absl::StrAppend(&msg, ". Hint: ", hint);
  return absl::Status(code, msg);
}

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

}  // namespace weft
