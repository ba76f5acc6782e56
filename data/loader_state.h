// LoaderState: where a DataLoader's batch stream stands, for checkpoints.
// It describes the next batch Next() will return (not what workers have
// prefetched), so DataLoader::Restore(state) continues with exactly the
// batches an uninterrupted run would have seen. The remaining fields pin the
// configuration the position is meaningful for; Restore rejects a state
// from a differently sized dataset, batch or world, or with other shuffle or
// drop_last settings. The rank is not part of it: every rank of a job stands
// at the same position, so any rank's state resumes all of them.
//
// Text form (one line, for checkpoint metadata):
//   weft-loader-state v1 epoch=2 batch=17 seed=1234 samples=5000 batch_size=8 world=4
//       shuffle=1 drop_last=1 global_batch=64
// (global_batch, which sets the epoch's length, is absent from older states:
// 0, not checked.)
#ifndef WEFT_DATA_LOADER_STATE_H_
#define WEFT_DATA_LOADER_STATE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft::data {

struct LoaderState {
  int64_t epoch = 0;
  int64_t batch = 0;  // index within the epoch of the next batch
  uint64_t seed = 0;
  int64_t num_samples = 0;
  int64_t batch_size = 0;
  int world_size = 0;
  bool shuffle = true;
  bool drop_last = true;
  int64_t global_batch = 0;  // DataLoader::Options::global_batch

  std::string Serialize() const;
  // The same position for another per-rank batch size and world size (a
  // resume under a different mesh): the samples consumed so far in the
  // epoch, batch x batch_size x world, must be a whole number of the new
  // global batches. The sampler's global order does not depend on the
  // world size, so the resumed run sees the samples the saved one would
  // have seen next.
  absl::StatusOr<LoaderState> Rescaled(int64_t new_batch_size, int new_world_size) const;
  static absl::StatusOr<LoaderState> Parse(absl::string_view text);

  friend bool operator==(const LoaderState& a, const LoaderState& b) {
    return a.epoch == b.epoch && a.batch == b.batch && a.seed == b.seed &&
           a.num_samples == b.num_samples && a.batch_size == b.batch_size &&
           a.world_size == b.world_size && a.shuffle == b.shuffle && a.drop_last == b.drop_last &&
           a.global_batch == b.global_batch;
  }
};

}  // namespace weft::data

#endif  // WEFT_DATA_LOADER_STATE_H_
