#include "core/nn/placement.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"

namespace weft {

std::string AxisPlacement::ToString() const {
  switch (kind) {
    case Kind::kReplicate: return absl::StrCat("Replicate@", axis);
    case Kind::kShard: return absl::StrCat(padded ? "PaddedShard(" : "Shard(", dim, ")@", axis);
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

Placement& Placement::PaddedShard(std::string axis, int index, int count) {
  Shard(std::move(axis), /*dim=*/0, index, count);
  axes_.back().padded = true;
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
  Box box{std::vector<int64_t>(global.size(), 0), global, global};
  bool padded_rows = false;  // dimension 0 already split in padded blocks
  for (const AxisPlacement& a : axes_) {
    if (a.kind != AxisPlacement::Kind::kShard) continue;
    if (a.dim < 0 || a.dim >= static_cast<int>(global.size())) {
      return InvalidArgument(absl::StrCat(a.ToString(), " of a tensor ", ShapeString(global)),
                             absl::StrCat("a dimension in [0, ", global.size(), ")"));
    }
    if (a.count < 1 || a.index < 0 || a.index >= a.count) {
      return InvalidArgument(absl::StrCat(a.ToString(), ": block ", a.index, " of ", a.count),
                             "a block index in [0, count)");
    }
    if (a.dim == 0 && padded_rows) {
      return InvalidArgument(absl::StrCat(a.ToString(), " after a padded shard of dimension 0"),
                             "a padded shard as the last split of its dimension");
    }
    const int64_t n = box.shape[a.dim];
    if (a.padded) {
      const int64_t block = (n + a.count - 1) / a.count;
      const int64_t begin = a.index * block;
      if (a.dim != 0 || begin >= n) {
        return InvalidArgument(
            absl::StrCat(a.ToString(), ": dimension ", a.dim, " of size ", n, " in blocks of ",
                         block, " (block ", a.index, " of ", a.count, ")"),
            "a padded split of dimension 0 whose every block holds at least one row",
            "the tensor has too few rows for the mesh axis");
      }
      padded_rows = true;
      box.offsets[0] += begin;
      box.shape[0] = std::min(block, n - begin);
      box.stored[0] = block;
      continue;
    }
    if (n % a.count != 0) {
      return InvalidArgument(
          absl::StrCat(a.ToString(), ": dimension ", a.dim, " of size ", n, " split ", a.count,
                       " ways (block ", a.index, ")"),
          "a size divisible by the mesh axis", "pick sizes that divide evenly, e.g. heads % tp == 0");
    }
    box.shape[a.dim] /= a.count;
    box.stored[a.dim] = box.shape[a.dim];
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

std::string Placement::ToString() const {
  if (axes_.empty()) return "Replicate";
  return absl::StrJoin(axes_, ", ", [](std::string* out, const AxisPlacement& a) {
    out->append(a.ToString());
  });
}

}  // namespace weft
