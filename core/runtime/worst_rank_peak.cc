#include "core/runtime/worst_rank_peak.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {
namespace {

std::string Key(int rank) { return absl::StrCat("weft_peak_mem/", rank); }

}  // namespace

absl::StatusOr<RankPeak> WorstRankPeak(comm::Store& store, int rank, int world_size,
                                       double peak_mem_mb, absl::Duration timeout) {
  RankPeak own{.rank = rank, .peak_mem_mb = peak_mem_mb};
  if (rank != 0) {
    WEFT_RETURN_IF_ERROR(store.Set(Key(rank), absl::StrCat(peak_mem_mb)));
    return own;
  }
  RankPeak worst = own;
  for (int r = 1; r < world_size; ++r) {
    absl::StatusOr<std::string> v = store.Get(Key(r), timeout);
    WEFT_RETURN_IF_ERROR(Annotate(v.status(), absl::StrCat("waiting for rank ", r,
                                                           "'s peak memory at the end of the run")));
    double mb = 0;
    if (!absl::SimpleAtod(*v, &mb)) {
      return Internal(absl::StrCat("rank ", r, " posted peak memory '", *v, "'"),
                           "a number of MiB");
    }
    if (mb > worst.peak_mem_mb) worst = {.rank = r, .peak_mem_mb = mb};
    WEFT_RETURN_IF_ERROR(store.DeleteKey(Key(r)).status());
  }
  return worst;
}

}  // namespace weft
