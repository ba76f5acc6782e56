// FlightRecorder: this process's last N collectives and point-to-point ops,
// kept for the post-mortem of a hang or a failure (after PyTorch's Flight
// Recorder). Every ProcessGroup records each op it issues (group, sequence,
// op, sizes, fingerprint, issue/start/end times and state); the ring is
// written out as one JSON file per rank (DumpTo) on a failure, a timeout or
// SIGUSR2, and //tools:hang_report reads every rank's file and names where
// the ranks diverge.
//
// States: issued (handed to the backend), started (the gloo worker began
// it), completed or failed (it ended), waited (Wait returned, for backends
// whose ops end on the device: nccl). Recording costs one lock and one small
// allocation per op; capacity 0 turns it off.
#ifndef WEFT_COMM_PROCESS_GROUP_FLIGHT_RECORDER_H_
#define WEFT_COMM_PROCESS_GROUP_FLIGHT_RECORDER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace weft::comm {

struct OpInfo;

enum class FlightState : int { kIssued, kStarted, kCompleted, kFailed, kWaited };
const char* FlightStateName(FlightState s);

// One recorded op. The backend's threads move it forward while a dump may
// read it, so the changing parts are atomics.
struct FlightEntry {
  std::string group;        // the group's name ("world", "dp_shard")
  std::vector<int> ranks;   // the job ranks of the group, in group-rank order
  int group_rank = 0;
  int64_t seq = 0;
  bool point_to_point = false;
  int peer = -1;            // group rank of the other side (send/recv)
  std::string op;           // "all_reduce"
  std::string detail;       // "sum, f32[1000] = 4000 B"
  std::string fingerprint;  // what all ranks must agree on
  int64_t issued_us = 0;
  std::atomic<int64_t> started_us{0};
  std::atomic<int64_t> ended_us{0};
  std::atomic<int> state{static_cast<int>(FlightState::kIssued)};

  void MarkStarted();
  // Completed or failed; the first end wins.
  void MarkEnded(bool ok);
  // Wait returned: ends an op whose backend never reported its end.
  void MarkWaited(bool ok);
};

class FlightRecorder {
 public:
  static constexpr int kDefaultCapacity = 2000;

  // The process's recorder (ops of every group of this process).
  static FlightRecorder& Global();

  // Keeps the last `entries` ops (0: records nothing). Drops what is kept.
  void SetCapacity(int entries);
  int capacity() const;
  // Who this process is in the job, written into dumps.
  void SetIdentity(int rank, int world_size);

  // A new entry for an op of the group whose job ranks are `ranks` (empty:
  // 0..size-1), or null when recording is off.
  std::shared_ptr<FlightEntry> Record(const OpInfo& info, absl::string_view group, int group_rank,
                                      int group_size, const std::vector<int>* ranks);

  // The kept entries, oldest first.
  std::vector<std::shared_ptr<const FlightEntry>> Snapshot() const;

  // The dump as JSON: identity, `reason`, and every kept entry.
  std::string ToJson(absl::string_view reason) const;
  // Writes ToJson to `dir`/rank_<rank>.json (dir created), atomically
  // (a temporary file renamed), and returns the path.
  absl::Status DumpTo(const std::string& dir, absl::string_view reason,
                      std::string* path = nullptr) const;

 private:
  mutable std::mutex mu_;
  int capacity_ = kDefaultCapacity;
  int rank_ = 0;
  int world_size_ = 1;
  std::deque<std::shared_ptr<FlightEntry>> ring_;
};

// The file a rank's dump goes to in `dir`.
std::string FlightDumpPath(const std::string& dir, int rank);

}  // namespace weft::comm

#endif  // WEFT_COMM_PROCESS_GROUP_FLIGHT_RECORDER_H_
