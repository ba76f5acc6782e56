// OpInfo: what one issued collective is (group, sequence number, op, dtype,
// sizes, peer), and the rich errors built from it. Every failure a rank
// reports names the same group and sequence number as its peers, so logs of
// different ranks line up.
#ifndef WEFT_COMM_PROCESS_GROUP_OP_INFO_H_
#define WEFT_COMM_PROCESS_GROUP_OP_INFO_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace weft::comm {

struct FlightEntry;  // flight_recorder.h

struct OpInfo {
  std::string group;  // "group 'world' (gloo, rank 1 of 4)"
  // 1-based sequence number. Collectives are numbered together, so every
  // rank of the group agrees on collective #k; point-to-point ops have
  // their own count on each rank (only the two ends take part in them).
  int64_t seq = 0;
  bool point_to_point = false;
  std::string op;      // "all_reduce", ..., "batch_send_recv"
  std::string detail;  // "sum, f32[1000] = 4000 B"
  // What every rank must agree on for a collective, independent of shapes
  // that may legitimately differ: "all_reduce sum f32 n=1000". Compared
  // across ranks when ProcessGroupOptions::check_consistency is set.
  std::string fingerprint;
  absl::Duration timeout = absl::ZeroDuration();
  int peer = -1;  // group rank of the other side for send/recv, else -1
  // The job-wide rank of each group rank, when the group is a subgroup
  // (null: group ranks are the job's ranks), so errors name the process.
  std::shared_ptr<const std::vector<int>> global_ranks;
  // This op's entry in the flight recorder (null when it records nothing):
  // the Work and the backend move its state forward.
  std::shared_ptr<FlightEntry> flight;

  // "all_reduce #3 (sum, f32[1000] = 4000 B) on group 'world' (gloo, rank 1 of 4)"
  std::string Describe() const;

  // "<Describe> failed: <cause>; expected ... Hint: ...". `peer` (group rank,
  // -1 unknown) is the rank the failure was observed on, when known.
  absl::Status Error(absl::StatusCode code, absl::string_view cause, int peer = -1) const;
};

// The "broken" flag of a group: the first error wins and every later op
// fails fast with it. Shared by the group and its Work handles.
class GroupHealth {
 public:
  void MarkBroken(const absl::Status& error);
  absl::Status status() const;  // OK, or the first error
  bool broken() const { return !status().ok(); }

 private:
  mutable std::mutex mu_;
  absl::Status first_error_;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_PROCESS_GROUP_OP_INFO_H_
