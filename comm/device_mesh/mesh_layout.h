// MeshLayout: the pure arithmetic of an n-D grid of ranks with named axes,
// without any communication (planners and checkpoint tools use it alone).
//
// Ranks are laid out row-major in the order the axes are given: the last
// axis varies fastest, so its groups hold adjacent ranks. By convention the
// axes go from outermost to innermost as
//     pp, dp_replicate, dp_shard, cp, tp
// (ep is carved from dp_shard x cp, see training_mesh.h), which keeps tp (the most bandwidth-hungry axis) on adjacent ranks, i.e.
// on one node of a real cluster. For mesh [dp=2, tp=2]:
//     rank:  0      1      2      3
//     (dp,tp)(0,0)  (0,1)  (1,0)  (1,1)
//     tp groups {0,1} {2,3};  dp groups {0,2} {1,3}.
#ifndef WEFT_COMM_DEVICE_MESH_MESH_LAYOUT_H_
#define WEFT_COMM_DEVICE_MESH_MESH_LAYOUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace weft::comm {

struct MeshAxis {
  std::string name;
  int size = 1;
};

class MeshLayout {
 public:
  // Checks: at least one axis; names non-empty, [a-z0-9_] and unique;
  // sizes >= 1; the product of the sizes equals `world_size`. Errors carry
  // the numbers.
  static absl::StatusOr<MeshLayout> Create(std::vector<MeshAxis> axes, int world_size);

  int world_size() const { return world_size_; }
  int ndim() const { return static_cast<int>(axes_.size()); }
  const std::vector<MeshAxis>& axes() const { return axes_; }

  absl::StatusOr<int> AxisIndex(absl::string_view name) const;
  absl::StatusOr<int> AxisSize(absl::string_view name) const;

  // Row-major coordinates of `rank` (last axis fastest), and back.
  std::vector<int> Coordinates(int rank) const;
  int RankAt(absl::Span<const int> coordinates) const;

  // The global ranks of the group that contains `rank` and spans `axes`
  // (the other coordinates fixed), in row-major order of those axes taken
  // in mesh order. `axes` may be given in any order but not repeat.
  absl::StatusOr<std::vector<int>> GroupRanks(int rank, absl::Span<const std::string> axes) const;
  // Which of the world_size / group_size such groups it is (row-major over
  // the other axes); distinct groups along the same axes get distinct ids.
  absl::StatusOr<int> GroupIndex(int rank, absl::Span<const std::string> axes) const;
  // `axes` sorted into mesh order, after checking they exist and differ.
  absl::StatusOr<std::vector<std::string>> CanonicalAxes(
      absl::Span<const std::string> axes) const;

  // "[dp_shard=2, tp=2]"
  std::string ToString() const;

 private:
  MeshLayout(std::vector<MeshAxis> axes, int world_size)
      : axes_(std::move(axes)), world_size_(world_size) {}
  absl::StatusOr<std::vector<bool>> AxisMask(absl::Span<const std::string> axes) const;

  std::vector<MeshAxis> axes_;
  int world_size_ = 1;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_DEVICE_MESH_MESH_LAYOUT_H_
