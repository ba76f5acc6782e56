// TrainingMesh: the 5-D mesh of a training job, pure arithmetic.
//
// Axes, outermost to innermost: pp, dp_replicate, dp_shard, cp, tp (after
// any axes of strategies' own, MeshSizes::outer). tp is
// innermost so a tp group holds adjacent ranks (one node). Expert
// parallelism does not get an axis of its own: ep is carved from the
// flattened dp_shard x cp ranks (f = dp_shard * cp_size + cp), in blocks of
// ep consecutive f. So for dp_shard=4, cp=1, ep=2 the ep groups along f are
// {0,1} {2,3}, and the "expert data-parallel" groups (ranks holding the same
// experts, which reduce the experts' gradients) are {0,2} {1,3}, across
// dp_replicate too.
//
// The data-parallel rank comes from the coordinates (dp_replicate, dp_shard),
// not from the world rank: all ranks of one tp, cp or pp group share it and
// read the same samples.
#ifndef WEFT_COMM_DEVICE_MESH_TRAINING_MESH_H_
#define WEFT_COMM_DEVICE_MESH_TRAINING_MESH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/device_mesh/mesh_layout.h"

namespace weft::comm {

// Requested sizes; 0 means "the rest of the world" (at most one 0).
struct MeshSizes {
  int pp = 1;
  int dp_replicate = 1;
  int dp_shard = 0;
  int cp = 1;
  int tp = 1;
  int ep = 1;  // must divide dp_shard * cp
  // Axes strategies declare as their own (--mesh_axes), outermost, in
  // this order. Their ranks read the same samples, like tp's and pp's.
  std::vector<MeshAxis> outer;
};

// The axis names in mesh order.
const std::vector<std::string>& TrainingMeshAxes();

class TrainingMesh {
 public:
  // Resolves a 0 size, then checks: sizes >= 0, at most one 0, the product
  // equals world_size, ep divides dp_shard * cp. Errors name the numbers.
  static absl::StatusOr<TrainingMesh> Create(const MeshSizes& sizes, int world_size);

  const MeshLayout& layout() const { return layout_; }
  int size(const std::string& axis) const { return layout_.AxisSize(axis).value_or(1); }
  int ep() const { return ep_; }
  // Coordinate of `rank` on `axis`.
  int Coordinate(int rank, const std::string& axis) const;

  // Data-parallel rank and size: (dp_replicate, dp_shard) row-major.
  int DataParallelRank(int rank) const;
  int DataParallelSize() const { return size("dp_replicate") * size("dp_shard"); }

  // Ranks of `rank`'s ep group (same pp, dp_replicate, tp; one ep block of
  // dp_shard x cp), in order of f.
  std::vector<int> ExpertParallelRanks(int rank) const;
  // Ranks holding the same experts as `rank` (same pp, tp and ep index;
  // every dp_replicate and every ep block), in rank order.
  std::vector<int> ExpertDataParallelRanks(int rank) const;

  // "[pp=1, dp_replicate=1, dp_shard=4, cp=1, tp=2] ep=2"
  std::string ToString() const;

 private:
  TrainingMesh(MeshLayout layout, int ep) : layout_(std::move(layout)), ep_(ep) {}
  // f = dp_shard * cp_size + cp of `rank`.
  int ShardCpIndex(int rank) const;

  MeshLayout layout_;
  int ep_ = 1;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_DEVICE_MESH_TRAINING_MESH_H_
