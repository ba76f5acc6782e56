// Loading a checkpoint into whatever this rank holds now, under any world
// size and strategy mix (resharding on load).
//
// The rank lists its local pieces through the sharding export
// (core/parallel/sharding_export.h), intersects each with the saved pieces
// of the same entry (checkpoint/piece_runs.h), and reads only the byte
// ranges that overlap, verifying the checksum of every chunk it reads.
// Optimizer state reshards the same way: it is just more entries.
#ifndef WEFT_CHECKPOINT_LOADER_H_
#define WEFT_CHECKPOINT_LOADER_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/checkpoint.pb.h"
#include "checkpoint/host_tensor.h"
#include "core/parallel/sharding_export.h"
#include "core/tensor/stream.h"

namespace weft::ckpt {

struct Checkpoint {
  std::string dir;  // the step directory
  Metadata meta;
  const Entry* Find(const std::string& name) const;
};

// Reads and checks step_dir/metadata.pb (format, version, piece geometry).
absl::StatusOr<Checkpoint> OpenCheckpoint(const std::string& step_dir);

struct LoadOptions {
  // Only parameter values: optimizer entries ("<param>:<kind>") are neither
  // required nor read, and the checkpoint may hold state this run lacks.
  bool weights_only = false;
  // Every entry name of the whole job (all ranks together). A rank holds
  // only some entries under sharded strategies, so checkpoint entries the
  // job lacks can only be found against this list; null skips that check.
  const std::set<std::string>* job_entries = nullptr;
};

struct LoadStats {
  int64_t bytes_read = 0;
  int64_t elements_loaded = 0;
};

// Every local piece must exist in the checkpoint with the same global
// shape, and (with job_entries, unless weights_only) every checkpoint entry
// must exist in the job; otherwise the error lists the names that differ.
absl::Status CheckCompatible(const Checkpoint& ckpt, const std::vector<StatePiece>& local,
                             const LoadOptions& options);

// Fills every local piece from the checkpoint (copies ordered on `stream`;
// returns after they completed).
absl::Status LoadState(const Checkpoint& ckpt, const std::vector<StatePiece>& local,
                       const Stream& stream, const LoadOptions& options, LoadStats* stats);

// Fills the local pieces named in `full` from full host tensors (foreign
// formats); pieces without a tensor in `full` are left as they are and
// listed in `*skipped`.
absl::Status LoadFromFull(const std::map<std::string, HostTensor>& full,
                          const std::vector<StatePiece>& local, const Stream& stream,
                          std::vector<std::string>* skipped);

// Reads every byte of every piece and checks every checksum.
absl::Status VerifyChecksums(const Checkpoint& ckpt, int64_t* bytes_checked);

// Full tensors of the entries `want` accepts (all when null), as f32.
absl::StatusOr<std::map<std::string, HostTensor>> ReadFullTensors(
    const Checkpoint& ckpt, const std::function<bool(const std::string&)>& want);

}  // namespace weft::ckpt

#endif  // WEFT_CHECKPOINT_LOADER_H_
