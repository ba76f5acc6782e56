// Checkpoint directories under a root, and their life cycle:
//
//   step_<N>/       complete: renamed into place after every file in it was
//                   written and fsynced, so it is never partial
//   step_<N>.tmp/   being written, or left by a crash: ignored and cleaned
//   step_<N>.old/   being deleted by pruning: ignored and cleaned
//
// A crash at any point leaves every complete checkpoint untouched, because
// the only operations on a complete one are the atomic rename that creates
// it and the rename to .old that starts its deletion.
#ifndef WEFT_CHECKPOINT_LAYOUT_H_
#define WEFT_CHECKPOINT_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weft::ckpt {

inline constexpr char kMetadataFile[] = "metadata.pb";

std::string StepDirName(int64_t step);        // "step_<N>"
std::string RankFileName(int rank);           // "rank_00003.bin"

struct CheckpointDir {
  int64_t step = 0;
  std::string path;
};

// Complete checkpoints under `root`, oldest first. A missing root has none.
absl::StatusOr<std::vector<CheckpointDir>> ListCheckpoints(const std::string& root);

// --resume: "latest" (the newest complete checkpoint under `root`) or a
// path to a step directory. NotFound, with what was searched, if none.
// "auto" is "latest" when `root` holds a complete checkpoint and "" (a new
// run) when it holds none: one command line for a job's first start and
// its restarts after preemption.
absl::StatusOr<std::string> ResolveResume(const std::string& root, const std::string& resume);

// Removes leftover .tmp and .old directories under `root`.
absl::Status RemoveLeftovers(const std::string& root);

// Keeps the newest `keep_last` complete checkpoints (0 keeps all).
absl::Status Prune(const std::string& root, int keep_last);

// fsync of a file or a directory (a directory's fsync makes the names in it
// durable, which a rename needs).
absl::Status FsyncPath(const std::string& path);

// Renames `from` to `to` (no overwrite of a complete checkpoint) and fsyncs
// the parent directory.
absl::Status DurableRename(const std::string& from, const std::string& to);

}  // namespace weft::ckpt

#endif  // WEFT_CHECKPOINT_LAYOUT_H_
