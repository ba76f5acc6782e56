#include "comm/process_group/op_info.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft::comm {

std::string OpInfo::Describe() const {
  return absl::StrCat(op, " #", seq, " (", detail, ") on ", group);
}

absl::Status OpInfo::Error(absl::StatusCode code, absl::string_view cause, int failed_peer) const {
  const int who = failed_peer >= 0 ? failed_peer : peer;
  // "rank 1 of the group (global rank 2)" where a subgroup's ranks differ.
  std::string peer_name = absl::StrCat("rank ", who);
  if (who >= 0 && global_ranks != nullptr && who < static_cast<int>(global_ranks->size())) {
    absl::StrAppend(&peer_name, " of the group (global rank ", (*global_ranks)[who], ")");
  }
  std::string what = absl::StrCat(Describe(), " failed");
  if (who >= 0) absl::StrAppend(&what, " (peer ", peer_name, ")");
  absl::StrAppend(&what, ": ", cause);
  const std::string expected =
      point_to_point
          ? absl::StrCat("the peer to issue the matching ", op == "send" ? "recv" : "send/recv",
                         " with the same size and tag within ", absl::FormatDuration(timeout))
          : absl::StrCat("every rank of the group to issue ", op, " #", seq,
                         " with matching sizes and finish within ",
                         absl::FormatDuration(timeout));
  std::string hint;
  if (code == absl::StatusCode::kDeadlineExceeded) {
    hint = "a rank died, hung, or issued a different op or size at this point: the ranks that "
           "reached this op report the same sequence number, so look for the rank whose log "
           "does not";
  } else if (code == absl::StatusCode::kFailedPrecondition) {
    hint = "the program issued different collectives (or sizes) on different ranks at this "
           "point: make every rank take the same code path";
  } else if (who >= 0) {
    const bool mapped = absl::StrContains(peer_name, "global rank");
    hint = absl::StrCat(peer_name, mapped ? "" : " of this group",
                        " failed or closed its connection; "
                        "check its log for the first error");
  } else {
    hint = "check the other ranks' logs for the first error";
  }
  return MakeError(code, what, expected, hint);
}

void GroupHealth::MarkBroken(const absl::Status& error) {
  if (error.ok()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (first_error_.ok()) first_error_ = error;
}

absl::Status GroupHealth::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_error_;
}

}  // namespace weft::comm
