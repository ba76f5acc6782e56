#include "core/parallel/sharding_export.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/parameter.h"

namespace weft {
namespace {

// The part of a target's range [param_offset, + n) inside the parameter's
// box: a padded shard's zero rows (a suffix of the local tensor) are no
// global elements, so no piece holds them.
struct Range {
  int64_t begin, end;
};
Range BoxRange(const OptimTarget& t) {
  const int64_t box = t.param->box_numel();
  return {std::min(t.param_offset, box), std::min(t.param_offset + t.value.numel(), box)};
}

PieceInfo Geometry(const OptimTarget& t, std::string name, const std::vector<int>& coords) {
  const Parameter& p = *t.param;
  PieceInfo info;
  info.name = std::move(name);
  info.global_shape = p.global_shape();
  info.box_offsets = p.local_offsets();
  info.box_shape = p.box_shape();
  const Range r = BoxRange(t);
  info.begin = r.begin;
  info.end = r.end;
  // A copy of a parameter another model-parallel rank owns (a tied
  // embedding on the last pipeline stage) is never the replica-0 holder.
  // Likewise a replica of a parameter that model-parallel ranks all hold.
  info.replica = p.copy_index() > 0 || p.mp_replica() > 0 ? 1 + t.replica : t.replica;
  info.mesh_coords = coords;
  return info;
}

// A target's tensor (value or state, t.value's size) as the piece's elements.
Tensor BoxElements(const OptimTarget& t, const Tensor& tensor) {
  const Range r = BoxRange(t);
  return tensor.View({tensor.numel()}).Slice(0, r.begin - t.param_offset, r.end - t.param_offset);
}

// Global row-major index of element `i` of a box.
int64_t GlobalIndex(const PieceInfo& p, int64_t i) {
  const int nd = static_cast<int>(p.global_shape.size());
  int64_t g = 0, rest = i, stride = 1;
  std::vector<int64_t> local(nd, 0);
  for (int d = nd - 1; d >= 0; --d) {
    local[d] = rest % p.box_shape[d];
    rest /= p.box_shape[d];
  }
  for (int d = nd - 1; d >= 0; --d) {
    g += (p.box_offsets[d] + local[d]) * stride;
    stride *= p.global_shape[d];
  }
  return g;
}

}  // namespace

absl::StatusOr<std::vector<StatePiece>> ExportState(const Optimizer& optimizer,
                                                    const std::vector<int>& mesh_coords) {
  std::vector<StatePiece> out;
  const std::vector<OptimTarget>& targets = optimizer.targets();
  for (size_t i = 0; i < targets.size(); ++i) {
    const OptimTarget& t = targets[i];
    if (t.param == nullptr) {
      return Internal(absl::StrCat("optimizer target ", t.name, " does not say which parameter it holds"),
                      "targets made with a param (strategies' OptimizerTargets)");
    }
    Tensor value = t.value;
    for (auto& [kind, state] : optimizer.TargetState(i)) {
      if (kind == "master") {
        value = state;  // the precise copy of a bf16 value
        continue;
      }
      out.push_back({Geometry(t, absl::StrCat(t.param->name(), ":", kind), mesh_coords),
                     BoxElements(t, state)});
    }
    out.push_back({Geometry(t, t.param->name(), mesh_coords), BoxElements(t, value)});
  }
  return out;
}

absl::StatusOr<std::vector<HostPiece>> ToHost(const std::vector<StatePiece>& pieces) {
  std::vector<HostPiece> out;
  out.reserve(pieces.size());
  for (const StatePiece& p : pieces) {
    WEFT_ASSIGN_OR_RETURN(std::vector<float> v, p.data.ToFloats());
    out.push_back({p.info, std::move(v)});
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::vector<float>>> Reassemble(
    const std::vector<HostPiece>& pieces, double replica_tol) {
  std::map<std::string, std::vector<float>> full;
  std::map<std::string, std::vector<char>> covered;
  for (int pass = 0; pass < 2; ++pass) {  // replica 0 first, then the copies
    for (const HostPiece& hp : pieces) {
      const PieceInfo& p = hp.info;
      if ((p.replica == 0) != (pass == 0)) continue;
      const int64_t n = NumElements(p.global_shape);
      if (static_cast<int64_t>(hp.values.size()) != p.end - p.begin || p.begin < 0 ||
          p.end > NumElements(p.box_shape) || p.box_shape.size() != p.global_shape.size()) {
        return InvalidArgument(absl::StrCat("piece of ", p.name, " [", p.begin, ", ", p.end,
                                            ") with ", hp.values.size(), " values"),
                               "a range inside its box with one value per element");
      }
      std::vector<float>& dst = full[p.name];
      std::vector<char>& seen = covered[p.name];
      if (dst.empty()) {
        dst.assign(n, 0.f);
        seen.assign(n, 0);
      }
      for (int64_t i = p.begin; i < p.end; ++i) {
        const int64_t g = GlobalIndex(p, i);
        const float v = hp.values[i - p.begin];
        if (pass == 0) {
          if (seen[g]) {
            return FailedPrecondition(absl::StrCat(p.name, " element ", g, " held twice as replica 0"),
                                      "each element on exactly one replica-0 piece");
          }
          seen[g] = 1;
          dst[g] = v;
        } else if (std::fabs(double(v) - dst[g]) > replica_tol * std::max(1.0, std::fabs(double(dst[g])))) {
          return FailedPrecondition(
              absl::StrCat(p.name, " element ", g, ": replica ", p.replica, " holds ", v,
                           ", replica 0 holds ", dst[g]),
              "identical replicas");
        }
      }
    }
  }
  for (const auto& [name, seen] : covered) {
    for (size_t g = 0; g < seen.size(); ++g) {
      if (!seen[g]) {
        return FailedPrecondition(absl::StrCat(name, " element ", g, " is on no rank"),
                                  "pieces covering every element");
      }
    }
  }
  return full;
}

}  // namespace weft
