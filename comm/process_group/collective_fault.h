// A debug fault for hang forensics: this process skips one all-reduce, or
// issues it with one element fewer, as a buggy rank would. Set from
// --debug_collective_fault on the rank it names; every other rank runs
// normally, so the job hangs or fails the way a real mismatch does, and the
// flight recorder's dumps (flight_recorder.h) show where.
//
//   "skip,rank=1,group=world,seq=5": all_reduce #5 on group 'world' is never
//     issued on rank 1 (its sequence number is used up, so the ranks wait
//     for each other on #5 and time out).
//   "resize,rank=1,group=world,seq=5": rank 1 issues it with numel - 1.
#ifndef WEFT_COMM_PROCESS_GROUP_COLLECTIVE_FAULT_H_
#define WEFT_COMM_PROCESS_GROUP_COLLECTIVE_FAULT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft::comm {

struct CollectiveFault {
  enum class Kind { kSkip, kResize };
  Kind kind = Kind::kSkip;
  int rank = 0;       // the job rank that misbehaves
  std::string group;  // the group's name ("dp/dp_shard#0") or its axes ("dp_shard")
  int64_t seq = 1;    // its all_reduce with this sequence number
};

absl::StatusOr<CollectiveFault> ParseCollectiveFault(absl::string_view spec);

// Process-wide; only the named rank should set it. nullopt clears it.
void SetCollectiveFault(std::optional<CollectiveFault> fault);
// The fault for all_reduce #seq on `group`, if one is set for it.
std::optional<CollectiveFault::Kind> CollectiveFaultFor(absl::string_view group, int64_t seq);

}  // namespace weft::comm

#endif  // WEFT_COMM_PROCESS_GROUP_COLLECTIVE_FAULT_H_
