// Checkpointer: saves this rank's part of the training state into
// <dir>/step_<N>/ with every other rank of the job, atomically.
//
// A save, on every rank:
//   1. copy the rank's pieces to host buffers (pinned on CUDA) at the step
//      boundary: the only part training waits for with --checkpoint_async;
//   2. write rank_<r>.bin into step_<N>.tmp/ and fsync it;
//   3. report the pieces and the rank's state to rank 0 through the job's
//      store.
// Rank 0 then checks that the replica-0 pieces cover every entry exactly
// once, writes metadata.pb, fsyncs it and the directory, renames
// step_<N>.tmp to step_<N>, prunes to --keep_last, removes leftovers and
// publishes the outcome; every rank's save ends with that outcome, so a
// failure anywhere fails the save everywhere instead of hanging.
//
// With async, steps 2-3 (and rank 0's commit) run on a background thread
// while training goes on; the next Save (or Wait) joins it first and
// returns its error. Nothing here runs a collective, so the thread never
// races the training step's communication.
#ifndef WEFT_CHECKPOINT_CHECKPOINTER_H_
#define WEFT_CHECKPOINT_CHECKPOINTER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "checkpoint/checkpoint.pb.h"
#include "checkpoint/rank_file.h"
#include "comm/store/store.h"
#include "core/parallel/sharding_export.h"
#include "core/tensor/stream.h"

namespace weft::ckpt {

struct CheckpointerOptions {
  std::string dir;
  int keep_last = 0;  // 0 keeps every checkpoint
  bool async = false;
  int rank = 0;
  int world_size = 1;
  std::shared_ptr<comm::Store> store;  // required when world_size > 1
  absl::Duration timeout = absl::Seconds(300);
  int64_t chunk_bytes = 4 << 20;
  // Called at named points of a save ("rank_file_written", "metadata_written",
  // "renamed", "pruned"); the crash test kills the process there.
  std::function<void(absl::string_view point)> fault_point;
};

// What the trainer hands over at a step boundary.
struct SaveRequest {
  int64_t step = 0;
  const std::vector<StatePiece>* pieces = nullptr;
  const Stream* stream = nullptr;  // the stream that produced the state
  RankState state;
  // Job-wide, used by rank 0 only.
  std::vector<MeshAxis> mesh;
  std::string strategies, job_config, model_summary, optimizer, tokenizer;
  std::string lr_schedule;  // Metadata::lr_schedule
};

struct SaveStats {
  int64_t step = 0;
  double blocked_ms = 0;  // training time spent in Save
  double write_ms = 0;    // the save's whole duration, copy to commit
  int64_t bytes = 0;      // this rank's data file
};

class Checkpointer {
 public:
  static absl::StatusOr<std::unique_ptr<Checkpointer>> Create(CheckpointerOptions options);
  ~Checkpointer();  // waits for a save in flight: a started checkpoint is never abandoned

  absl::Status Save(const SaveRequest& request);
  // Finishes the save in flight, if any, and returns its outcome.
  absl::Status Wait();
  // The last finished save (after Wait, or a synchronous Save).
  const SaveStats& last() const { return last_; }
  // Training time the latest Save call took (for async: the copy to host,
  // plus joining the previous save if it was still writing).
  double last_blocked_ms() const { return blocked_ms_; }

 private:
  explicit Checkpointer(CheckpointerOptions options);
  struct Job;
  absl::Status WriteAndCommit(Job& job);
  absl::Status Commit(Job& job, std::vector<RankReport> reports);
  void Fault(absl::string_view point) const {
    if (options_.fault_point) options_.fault_point(point);
  }

  CheckpointerOptions options_;
  std::vector<Tensor> buffers_;  // host copies, reused across saves
  std::unique_ptr<Job> pending_;
  std::thread thread_;
  absl::Status thread_status_;
  SaveStats last_;
  double blocked_ms_ = 0;
};

}  // namespace weft::ckpt

#endif  // WEFT_CHECKPOINT_CHECKPOINTER_H_
