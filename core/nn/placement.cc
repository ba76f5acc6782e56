#include "core/nn/placement.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"

namespace weft {

std::string AxisPlacement::ToString() const {
  switch (kind) {
    case Kind::kReplicate: return absl::StrCat("Replicate@", axis);
    case Kind::kShard: return absl::StrCat("Shard(", dim, ")@", axis);
    case Kind::kFlatShard: return absl::StrCat("FlatShard[", begin, ",", end, ")@", axis);
  }
  return "?";
}

Placement& Placement::Shard(std::string axis, int dim, int index, int count) {
  AxisPlacement a;
  a.axis = std::move(axis);
  a.kind = AxisPlacement::Kind::kShard;
  a.dim = dim;
  a.index = index;
  a.count = count;
  axes_.push_back(std::move(a));
  return *this;
}

Placement& Placement::FlatShard(std::string axis, int64_t begin, int64_t end) {
  AxisPlacement a;
  a.axis = std::move(axis);
  a.kind = AxisPlacement::Kind::kFlatShard;
  a.begin = begin;
  a.end = end;
  axes_.push_back(std::move(a));
  return *this;
}

absl::StatusOr<Box> Placement::LocalBox(const Shape& global) const {
  Box box{std::vector<int64_t>(global.size(), 0), global};
  for (const AxisPlacement& a : axes_) {
    if (a.kind != AxisPlacement::Kind::kShard) continue;
    if (a.dim < 0 || a.dim >= static_cast<int>(global.size())) {
      return InvalidArgument(absl::StrCat(a.ToString(), " of a tensor ", ShapeString(global)),
                             absl::StrCat("a dimension in [0, ", global.size(), ")"));
    }
    if (a.count < 1 || a.index < 0 || a.index >= a.count ||
        box.shape[a.dim] % a.count != 0) {
      return InvalidArgument(
          absl::StrCat(a.ToString(), ": dimension ", a.dim, " of size ", box.shape[a.dim],
                       " split ", a.count, " ways (block ", a.index, ")"),
          "a size divisible by the mesh axis", "pick sizes that divide evenly, e.g. heads % tp == 0");
    }
    box.shape[a.dim] /= a.count;
    box.offsets[a.dim] += a.index * box.shape[a.dim];
  }
  return box;
}

bool Placement::ShardedOver(const std::string& axis) const {
  for (const AxisPlacement& a : axes_) {
    if (a.axis == axis && a.kind != AxisPlacement::Kind::kReplicate) return true;
  }
  return false;
}

bool Placement::HasDimShards() const {
  for (const AxisPlacement& a : axes_) {
    if (a.kind == AxisPlacement::Kind::kShard) return true;
  }
  return false;
}

std::string Placement::ToString() const {
  if (axes_.empty()) return "Replicate";
  return absl::StrJoin(axes_, ", ", [](std::string* out, const AxisPlacement& a) {
    out->append(a.ToString());
  });
}

}  // namespace weft
