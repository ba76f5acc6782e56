// DeviceMesh: a MeshLayout plus this rank's process groups, one per axis
// and, on request, one per set of axes (a flattened group such as
// dp_replicate x dp_shard for FSDP's reduce_scatter).
//
//   auto mesh = DeviceMesh::Create({{"dp_shard", 2}, {"tp", 2}}, rank, world, store);
//   auto tp = (*mesh)->Group("tp");                   // my tp group
//   auto dp = (*mesh)->FlatGroup({"dp_replicate", "dp_shard"});
//
// Each rank creates only the groups it belongs to. A group's store keys live
// under "pg/<mesh name>/<axes>#<group index>", so groups of different
// coordinates never collide. Per-axis groups are created eagerly by
// Create(), in axis order, which every rank does identically; flattened
// groups are created on first use and cached, so every rank must ask for
// the same flattened groups in the same order (like any collective).
// Group ranks inside a subgroup follow the row-major order of the mesh (see
// GroupRanks). Axis order and the tp-innermost convention: mesh_layout.h.
#ifndef WEFT_COMM_DEVICE_MESH_DEVICE_MESH_H_
#define WEFT_COMM_DEVICE_MESH_DEVICE_MESH_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/device_mesh/mesh_layout.h"
#include "comm/process_group/options.h"
#include "comm/process_group/process_group.h"
#include "comm/store/store.h"

namespace weft::comm {

struct DeviceMeshOptions {
  // Backend of every group ("gloo" or "nccl").
  std::string backend = "gloo";
  // Settings shared by every group; `name` prefixes the groups' names.
  ProcessGroupOptions group = {.name = "mesh"};
  // Create the per-axis groups in Create() (recommended: a fixed order on
  // every rank). When false they are created on first use, in whatever
  // order each rank asks, which must then be the same on every rank.
  bool eager = true;
};

class DeviceMesh {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceMesh>> Create(std::vector<MeshAxis> axes, int rank,
                                                            int world_size,
                                                            std::shared_ptr<Store> store,
                                                            DeviceMeshOptions options = {});

  const MeshLayout& layout() const { return layout_; }
  int rank() const { return rank_; }
  int world_size() const { return layout_.world_size(); }

  // This rank's coordinate on `axis`, and the axis size.
  absl::StatusOr<int> Coordinate(absl::string_view axis) const;
  absl::StatusOr<int> AxisSize(absl::string_view axis) const { return layout_.AxisSize(axis); }

  // Global ranks of this rank's group along `axis` / the flattened `axes`;
  // the group rank of each is its index here.
  absl::StatusOr<std::vector<int>> GroupRanks(absl::string_view axis) const;
  absl::StatusOr<std::vector<int>> FlatGroupRanks(absl::Span<const std::string> axes) const;

  // This rank's group along `axis` (cached).
  absl::StatusOr<std::shared_ptr<ProcessGroup>> Group(absl::string_view axis);
  // This rank's group spanning every axis in `axes` (created on first use).
  absl::StatusOr<std::shared_ptr<ProcessGroup>> FlatGroup(absl::Span<const std::string> axes);
  // Every rank of the mesh: FlatGroup over all its axes.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> WorldGroup();

  // A new group of the given global ranks (this rank among them), named
  // "<label>" so two groups of the same ranks get separate communicators
  // (a pipeline keeps activations and gradients on separate links). Not
  // cached: every member calls it once, in the same order as its other
  // group creations.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> NewGroup(const std::vector<int>& ranks,
                                                         absl::string_view label);

  // "mesh [dp_shard=2, tp=2], rank 3 at (1, 1)"
  std::string ToString() const;

 private:
  DeviceMesh(MeshLayout layout, int rank, std::shared_ptr<Store> store, DeviceMeshOptions options)
      : layout_(std::move(layout)),
        rank_(rank),
        store_(std::move(store)),
        options_(std::move(options)) {}

  const MeshLayout layout_;
  const int rank_;
  const std::shared_ptr<Store> store_;
  const DeviceMeshOptions options_;
  std::mutex mu_;
  // Keyed by the canonical axes joined with '+'.
  std::map<std::string, std::shared_ptr<ProcessGroup>> groups_;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_DEVICE_MESH_DEVICE_MESH_H_
