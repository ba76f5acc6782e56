#include "comm/device_mesh/mesh_layout.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"

namespace weft::comm {
namespace {

bool ValidName(absl::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string AxesString(absl::Span<const MeshAxis> axes) {
  return absl::StrCat("[", absl::StrJoin(axes, ", ", [](std::string* out, const MeshAxis& a) {
                        absl::StrAppend(out, a.name, "=", a.size);
                      }), "]");
}

}  // namespace

absl::StatusOr<MeshLayout> MeshLayout::Create(std::vector<MeshAxis> axes, int world_size) {
  const std::string shown = AxesString(axes);
  if (axes.empty()) {
    return InvalidArgument("a device mesh with no axes",
                           "at least one named axis, e.g. [dp_shard=<world size>]");
  }
  std::set<std::string> seen;
  int64_t product = 1;
  for (const MeshAxis& a : axes) {
    if (!ValidName(a.name)) {
      return InvalidArgument(absl::StrCat("mesh ", shown, " has axis name '", a.name, "'"),
                             "names of lowercase letters, digits and '_' (e.g. dp_shard, tp)");
    }
    if (!seen.insert(a.name).second) {
      return InvalidArgument(absl::StrCat("mesh ", shown, " names axis '", a.name, "' twice"),
                             "unique axis names");
    }
    if (a.size < 1) {
      return InvalidArgument(absl::StrCat("mesh ", shown, " gives axis '", a.name, "' size ",
                                          a.size),
                             "sizes >= 1 (use 1 for an unused axis)");
    }
    product *= a.size;
  }
  if (product != world_size) {
    return InvalidArgument(
        absl::StrCat("mesh ", shown, " has ", product, " ranks but the world size is ",
                     world_size),
        "the product of the axis sizes to equal the world size",
        world_size % product == 0
            ? absl::StrCat("grow an axis by ", world_size / product, "x (e.g. dp_shard)")
            : absl::StrCat("pick sizes whose product is ", world_size,
                           ", or launch ", product, " ranks"));
  }
  return MeshLayout(std::move(axes), world_size);
}

absl::StatusOr<int> MeshLayout::AxisIndex(absl::string_view name) const {
  for (int i = 0; i < ndim(); ++i) {
    if (axes_[i].name == name) return i;
  }
  std::vector<std::string> names;
  for (const MeshAxis& a : axes_) names.push_back(a.name);
  return NotFound(absl::StrCat("mesh ", ToString(), " has no axis '", name, "'"),
                  absl::StrCat("one of: ", absl::StrJoin(names, ", ")));
}

absl::StatusOr<int> MeshLayout::AxisSize(absl::string_view name) const {
  absl::StatusOr<int> i = AxisIndex(name);
  if (!i.ok()) return i.status();
  return axes_[*i].size;
}

std::vector<int> MeshLayout::Coordinates(int rank) const {
  std::vector<int> coords(ndim());
  for (int i = ndim() - 1; i >= 0; --i) {
    coords[i] = rank % axes_[i].size;
    rank /= axes_[i].size;
  }
  return coords;
}

int MeshLayout::RankAt(absl::Span<const int> coordinates) const {
  int rank = 0;
  for (int i = 0; i < ndim(); ++i) rank = rank * axes_[i].size + coordinates[i];
  return rank;
}

absl::StatusOr<std::vector<bool>> MeshLayout::AxisMask(absl::Span<const std::string> axes) const {
  if (axes.empty()) {
    return InvalidArgument("an empty set of mesh axes", "at least one axis name");
  }
  std::vector<bool> mask(ndim(), false);
  for (const std::string& name : axes) {
    absl::StatusOr<int> i = AxisIndex(name);
    if (!i.ok()) return i.status();
    if (mask[*i]) {
      return InvalidArgument(absl::StrCat("axis '", name, "' listed twice"), "distinct axes");
    }
    mask[*i] = true;
  }
  return mask;
}

absl::StatusOr<std::vector<std::string>> MeshLayout::CanonicalAxes(
    absl::Span<const std::string> axes) const {
  absl::StatusOr<std::vector<bool>> mask = AxisMask(axes);
  if (!mask.ok()) return mask.status();
  std::vector<std::string> ordered;
  for (int i = 0; i < ndim(); ++i) {
    if ((*mask)[i]) ordered.push_back(axes_[i].name);
  }
  return ordered;
}

absl::StatusOr<std::vector<int>> MeshLayout::GroupRanks(int rank,
                                                        absl::Span<const std::string> axes) const {
  absl::StatusOr<std::vector<bool>> mask = AxisMask(axes);
  if (!mask.ok()) return mask.status();
  const std::vector<int> mine = Coordinates(rank);
  // Enumerate the selected axes row-major (last selected axis fastest).
  std::vector<int> selected;
  int group_size = 1;
  for (int i = 0; i < ndim(); ++i) {
    if ((*mask)[i]) {
      selected.push_back(i);
      group_size *= axes_[i].size;
    }
  }
  std::vector<int> ranks;
  std::vector<int> coords = mine;
  for (int k = 0; k < group_size; ++k) {
    int rest = k;
    for (int j = static_cast<int>(selected.size()) - 1; j >= 0; --j) {
      coords[selected[j]] = rest % axes_[selected[j]].size;
      rest /= axes_[selected[j]].size;
    }
    ranks.push_back(RankAt(coords));
  }
  return ranks;
}

absl::StatusOr<int> MeshLayout::GroupIndex(int rank, absl::Span<const std::string> axes) const {
  absl::StatusOr<std::vector<bool>> mask = AxisMask(axes);
  if (!mask.ok()) return mask.status();
  const std::vector<int> coords = Coordinates(rank);
  int index = 0;
  for (int i = 0; i < ndim(); ++i) {
    if (!(*mask)[i]) index = index * axes_[i].size + coords[i];
  }
  return index;
}

std::string MeshLayout::ToString() const { return AxesString(axes_); }

}  // namespace weft::comm
