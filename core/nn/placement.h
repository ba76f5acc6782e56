// Placement: how a parameter's global tensor is laid out over a device
// mesh, per mesh axis (the DTensor idea, reduced to what strategies and
// checkpoints need).
//
//   Replicate        every rank on the axis holds the same values (default
//                    for any axis not listed)
//   Shard(dim)       the axis splits tensor dimension `dim` evenly; this
//                    rank holds block `index` of `count` (tensor parallel)
//   PaddedShard(0)   the same over dimension 0 in blocks of ceil(n / count)
//                    rows: the last block runs past the end and the rank
//                    stores zero rows there (a vocabulary not divisible by
//                    tp); the stored piece is the box plus those rows
//   FlatShard[b, e)  this rank holds elements [b, e) of the row-major
//                    local tensor (zero-3 / fsdp flat sharding)
//
// Shards compose in the order added: the local piece of a parameter is a
// box of the global tensor (offsets + shape) from the Shard entries, and a
// FlatShard range within that box.
#ifndef WEFT_CORE_NN_PLACEMENT_H_
#define WEFT_CORE_NN_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/tensor.h"

namespace weft {

struct AxisPlacement {
  enum class Kind { kReplicate, kShard, kFlatShard };
  std::string axis;
  Kind kind = Kind::kReplicate;
  int dim = 0;                        // kShard
  int index = 0, count = 1;           // kShard: this rank's block of `count`
  bool padded = false;                // kShard: ceil-sized blocks, zero rows past the end
  int64_t begin = 0, end = 0;         // kFlatShard: range in the local tensor
  std::string ToString() const;       // "Shard(0)@tp", "FlatShard[0,512)@dp_shard"
};

// A box of a global tensor: where a local piece sits.
struct Box {
  std::vector<int64_t> offsets;  // per dimension
  Shape shape;
  // What the rank stores: `shape`, plus the zero rows (dimension 0) where a
  // padded shard runs past the end; the box is a row-major prefix of it.
  Shape stored;
};

class Placement {
 public:
  // Adds Shard(dim) over `axis` of size `count`, this rank at `index`.
  Placement& Shard(std::string axis, int dim, int index, int count);
  // Adds PaddedShard(0) over `axis`: blocks of ceil(rows / count) rows.
  Placement& PaddedShard(std::string axis, int index, int count);
  // Records that only [begin, end) of the local tensor lives on this rank.
  Placement& FlatShard(std::string axis, int64_t begin, int64_t end);

  // The local piece's box in `global`; an error when a sharded dimension
  // does not divide evenly (Shard) or does not exist, or when a padded
  // block would hold no row of the tensor.
  absl::StatusOr<Box> LocalBox(const Shape& global) const;

  bool ShardedOver(const std::string& axis) const;
  // Replicated over `axis`: neither Shard nor FlatShard on it.
  bool ReplicatedOver(const std::string& axis) const { return !ShardedOver(axis); }
  const std::vector<AxisPlacement>& axes() const { return axes_; }
  std::string ToString() const;  // "Replicate" or "Shard(0)@tp, FlatShard[0,8)@dp_shard"

 private:
  std::vector<AxisPlacement> axes_;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_PLACEMENT_H_
