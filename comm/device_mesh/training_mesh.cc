#include "comm/device_mesh/training_mesh.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"

namespace weft::comm {
namespace {

std::string Requested(const MeshSizes& s) {
  std::string outer;
  for (const MeshAxis& a : s.outer) absl::StrAppend(&outer, a.name, "=", a.size, " ");
  return absl::StrCat(outer.empty() ? "" : absl::StrCat("--mesh_axes ", outer), "--pp=", s.pp, " --dp_replicate=", s.dp_replicate,
                      " --dp_shard=", s.dp_shard, " --cp=", s.cp, " --tp=", s.tp);
}

}  // namespace

const std::vector<std::string>& TrainingMeshAxes() {
  static const auto* axes =
      new std::vector<std::string>{"pp", "dp_replicate", "dp_shard", "cp", "tp"};
  return *axes;
}

absl::StatusOr<TrainingMesh> TrainingMesh::Create(const MeshSizes& sizes, int world_size) {
  std::vector<int> v;
  std::vector<std::string> names;
  for (const MeshAxis& a : sizes.outer) {
    v.push_back(a.size);
    names.push_back(a.name);
  }
  // Offset of the training axes (pp ...) in v, after the outer ones.
  const size_t t = v.size();
  for (int s : {sizes.pp, sizes.dp_replicate, sizes.dp_shard, sizes.cp, sizes.tp}) v.push_back(s);
  for (const std::string& n : TrainingMeshAxes()) names.push_back(n);
  int zeros = 0;
  int64_t known = 1;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0) {
      return InvalidArgument(absl::StrCat("--", names[i], "=", v[i]),
                             "a size >= 1, or 0 for \"the rest of the ranks\"");
    }
    if (v[i] == 0) {
      ++zeros;
    } else {
      known *= v[i];
    }
  }
  if (zeros > 1) {
    return InvalidArgument(absl::StrCat("mesh sizes ", Requested(sizes), " leave ", zeros,
                                        " axes at 0 (\"the rest\")"),
                           "at most one axis of size 0", "give every other axis its size");
  }
  if (world_size % known != 0 || (zeros == 0 && known != world_size)) {
    return InvalidArgument(
        absl::StrCat("mesh sizes ", Requested(sizes), " multiply to ", known,
                     zeros ? " (before the 0 axis)" : "", " but the world size is ",
                     world_size),
        zeros ? absl::StrCat("sizes whose product divides ", world_size)
              : absl::StrCat(t > 0 ? "the outer axes x " : "",
                             "pp x dp_replicate x dp_shard x cp x tp = ", world_size),
        world_size % known == 0
            ? absl::StrCat("set one axis to 0 to give it the remaining ", world_size / known,
                           "x, e.g. --dp_shard=0")
            : absl::StrCat("pick sizes whose product is ", world_size, ", or launch a multiple "
                           "of ", known, " ranks"));
  }
  for (int& s : v) {
    if (s == 0) s = static_cast<int>(world_size / known);
  }
  const int shard_cp = v[t + 2] * v[t + 3];
  if (sizes.ep < 1 || shard_cp % sizes.ep != 0) {
    return InvalidArgument(
        absl::StrCat("--ep=", sizes.ep, " with dp_shard=", v[t + 2], " x cp=", v[t + 3], " = ",
                     shard_cp, " ranks to carve it from"),
        absl::StrCat("an ep >= 1 that divides dp_shard x cp = ", shard_cp),
        "expert parallelism reuses the dp_shard and cp ranks: raise --dp_shard or lower --ep");
  }
  std::vector<MeshAxis> axes;
  for (size_t i = 0; i < v.size(); ++i) axes.push_back({names[i], v[i]});
  absl::StatusOr<MeshLayout> layout = MeshLayout::Create(std::move(axes), world_size);
  if (!layout.ok()) return layout.status();
  return TrainingMesh(*std::move(layout), sizes.ep);
}

int TrainingMesh::Coordinate(int rank, const std::string& axis) const {
  const std::vector<int> c = layout_.Coordinates(rank);
  return c[layout_.AxisIndex(axis).value()];
}

int TrainingMesh::DataParallelRank(int rank) const {
  return Coordinate(rank, "dp_replicate") * size("dp_shard") + Coordinate(rank, "dp_shard");
}

int TrainingMesh::ShardCpIndex(int rank) const {
  return Coordinate(rank, "dp_shard") * size("cp") + Coordinate(rank, "cp");
}

std::vector<int> TrainingMesh::ExpertParallelRanks(int rank) const {
  const int block = ShardCpIndex(rank) / ep_;
  std::vector<int> coords = layout_.Coordinates(rank);
  const int shard = layout_.AxisIndex("dp_shard").value();
  const int cp = layout_.AxisIndex("cp").value();
  std::vector<int> ranks;
  for (int f = block * ep_; f < (block + 1) * ep_; ++f) {
    coords[shard] = f / size("cp");
    coords[cp] = f % size("cp");
    ranks.push_back(layout_.RankAt(coords));
  }
  return ranks;
}

std::vector<int> TrainingMesh::ExpertDataParallelRanks(int rank) const {
  const int mine = ShardCpIndex(rank) % ep_;
  std::vector<int> ranks;
  for (int r = 0; r < layout_.world_size(); ++r) {
    if (Coordinate(r, "pp") == Coordinate(rank, "pp") &&
        Coordinate(r, "tp") == Coordinate(rank, "tp") && ShardCpIndex(r) % ep_ == mine) {
      ranks.push_back(r);
    }
  }
  return ranks;
}

std::string TrainingMesh::ToString() const {
  return absl::StrCat(layout_.ToString(), ep_ > 1 ? absl::StrCat(" ep=", ep_) : "");
}

}  // namespace weft::comm
