#include "comm/device_mesh/device_mesh.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/process_group/registry.h"
#include "core/base/errors.h"

namespace weft::comm {

absl::StatusOr<std::unique_ptr<DeviceMesh>> DeviceMesh::Create(std::vector<MeshAxis> axes,
                                                               int rank, int world_size,
                                                               std::shared_ptr<Store> store,
                                                               DeviceMeshOptions options) {
  absl::StatusOr<MeshLayout> layout = MeshLayout::Create(std::move(axes), world_size);
  if (!layout.ok()) return layout.status();
  if (rank < 0 || rank >= world_size) {
    return InvalidArgument(absl::StrCat("rank ", rank, " for mesh ", layout->ToString()),
                           absl::StrCat("a rank in [0, ", world_size, ")"));
  }
  if (store == nullptr) {
    return InvalidArgument("DeviceMesh::Create got a null store", "the job's store");
  }
  std::unique_ptr<DeviceMesh> mesh(
      new DeviceMesh(*std::move(layout), rank, std::move(store), std::move(options)));
  if (mesh->options_.eager) {
    for (const MeshAxis& axis : mesh->layout_.axes()) {
      absl::StatusOr<std::shared_ptr<ProcessGroup>> group = mesh->Group(axis.name);
      if (!group.ok()) return group.status();
    }
  }
  return mesh;
}

absl::StatusOr<int> DeviceMesh::Coordinate(absl::string_view axis) const {
  absl::StatusOr<int> i = layout_.AxisIndex(axis);
  if (!i.ok()) return i.status();
  return layout_.Coordinates(rank_)[*i];
}

absl::StatusOr<std::vector<int>> DeviceMesh::GroupRanks(absl::string_view axis) const {
  const std::string a(axis);
  return layout_.GroupRanks(rank_, {&a, 1});
}

absl::StatusOr<std::vector<int>> DeviceMesh::FlatGroupRanks(
    absl::Span<const std::string> axes) const {
  return layout_.GroupRanks(rank_, axes);
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> DeviceMesh::Group(absl::string_view axis) {
  const std::string a(axis);
  return FlatGroup({&a, 1});
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> DeviceMesh::WorldGroup() {
  std::vector<std::string> axes;
  for (const MeshAxis& a : layout_.axes()) axes.push_back(a.name);
  return FlatGroup(axes);
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> DeviceMesh::FlatGroup(
    absl::Span<const std::string> axes) {
  absl::StatusOr<std::vector<std::string>> canonical = layout_.CanonicalAxes(axes);
  if (!canonical.ok()) return canonical.status();
  const std::string key = absl::StrJoin(*canonical, "+");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(key);
  if (it != groups_.end()) return it->second;

  absl::StatusOr<std::vector<int>> ranks = layout_.GroupRanks(rank_, *canonical);
  if (!ranks.ok()) return ranks.status();
  absl::StatusOr<int> index = layout_.GroupIndex(rank_, *canonical);
  if (!index.ok()) return index.status();
  const int group_rank =
      static_cast<int>(std::find(ranks->begin(), ranks->end(), rank_) - ranks->begin());
  ProcessGroupOptions group_options = options_.group;
  group_options.name = absl::StrCat(options_.group.name, "/", key, "#", *index);
  absl::StatusOr<std::shared_ptr<ProcessGroup>> group =
      CreateProcessGroup(options_.backend, store_, group_rank,
                         static_cast<int>(ranks->size()), group_options);
  if (!group.ok()) {
    return Annotate(group.status(),
                    absl::StrCat("creating the '", key, "' group of ", ToString(), " (ranks [",
                                 absl::StrJoin(*ranks, ", "), "])"));
  }
  (*group)->set_global_ranks(*ranks);
  groups_.emplace(key, *group);
  return *group;
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> DeviceMesh::NewGroup(const std::vector<int>& ranks,
                                                                   absl::string_view label) {
  const auto me = std::find(ranks.begin(), ranks.end(), rank_);
  if (me == ranks.end()) {
    return InvalidArgument(absl::StrCat("rank ", rank_, " creating group '", label, "' of ranks [",
                                        absl::StrJoin(ranks, ", "), "]"),
                           "only the group's members create it");
  }
  ProcessGroupOptions group_options = options_.group;
  group_options.name = absl::StrCat(options_.group.name, "/", label, "[", absl::StrJoin(ranks, ","), "]");
  absl::StatusOr<std::shared_ptr<ProcessGroup>> group =
      CreateProcessGroup(options_.backend, store_, static_cast<int>(me - ranks.begin()),
                         static_cast<int>(ranks.size()), group_options);
  if (!group.ok()) {
    return Annotate(group.status(), absl::StrCat("creating group '", label, "' of ", ToString()));
  }
  (*group)->set_global_ranks(ranks);
  return *group;
}

std::string DeviceMesh::ToString() const {
  return absl::StrCat("mesh ", layout_.ToString(), ", rank ", rank_, " at (",
                      absl::StrJoin(layout_.Coordinates(rank_), ", "), ")");
}

}  // namespace weft::comm
