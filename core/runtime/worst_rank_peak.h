// The job's largest training peak over all ranks, gathered once at the end
// of a run through the rendezvous store: rank 0's own peak (what the step
// log shows) can be far from the worst rank's under pp, ep or uneven
// shards, and that is the number a memory estimate must bound.
#ifndef WEFT_CORE_RUNTIME_WORST_RANK_PEAK_H_
#define WEFT_CORE_RUNTIME_WORST_RANK_PEAK_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/store/store.h"

namespace weft {

struct RankPeak {
  int rank = 0;
  double peak_mem_mb = 0;
};

// Every rank posts its peak; rank 0 waits (up to `timeout`) for all of them
// and returns the largest (the lowest rank on ties), other ranks their own.
// Rank 0 removes the keys, so a later run on the same store starts clean.
absl::StatusOr<RankPeak> WorstRankPeak(comm::Store& store, int rank, int world_size,
                                       double peak_mem_mb, absl::Duration timeout);

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_WORST_RANK_PEAK_H_
