#include "core/nn/parameter.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/kernels/philox.h"

namespace weft {
namespace {

// FNV-1a: a stable hash of the parameter name, independent of the platform.
uint64_t HashName(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

absl::Status Parameter::SetPlacement(Placement placement) {
  if (value.defined()) {
    return FailedPrecondition(absl::StrCat("placing ", name_, " after it was materialized"),
                              "SetPlacement before MaterializeParameters",
                              "apply tensor-parallel strategies before materialization");
  }
  absl::StatusOr<Box> box = placement.LocalBox(global_shape_);
  if (!box.ok()) {
    return InvalidArgument(absl::StrCat("placement of ", name_, ": ", box.status().message()),
                           "a placement that divides the parameter evenly");
  }
  shape_ = box->stored;
  box_shape_ = box->shape;
  offsets_ = box->offsets;
  placement_ = std::move(placement);
  return absl::OkStatus();
}

absl::Status InitParameterSlice(const Parameter& param, uint64_t seed, int64_t offset,
                                Tensor& out) {
  if (!out.device().is_cpu() || out.dtype() != DType::kF32 || !out.is_contiguous()) {
    return InvalidArgument("init target " + out.DebugString(), "a contiguous f32 CPU tensor");
  }
  if (offset < 0 || offset + out.numel() > param.global_numel()) {
    return InvalidArgument(absl::StrCat("init slice [", offset, ", ", offset + out.numel(),
                                        ") of ", param.name()),
                           absl::StrCat("a range inside [0, ", param.global_numel(), ")"));
  }
  float* p = out.data<float>();
  const InitSpec& init = param.init();
  if (init.kind != InitSpec::Kind::kNormal) {
    const float v = init.kind == InitSpec::Kind::kOnes ? 1.f : 0.f;
    std::fill(p, p + out.numel(), v);
    return absl::OkStatus();
  }
  const uint64_t key = HashName(param.name()) ^ (seed * 0x9E3779B97F4A7C15ull);
  for (int64_t i = 0; i < out.numel(); ++i) {
    // Box-Muller from two uniforms at stream positions 2i and 2i+1.
    const uint64_t idx = static_cast<uint64_t>(offset + i);
    const float u1 = PhiloxUniform(key, 2 * idx) + 0x1p-25f;  // (0, 1]: log is finite
    const float u2 = PhiloxUniform(key, 2 * idx + 1);
    const float z = std::sqrt(-2.0f * std::log(u1)) * std::cos(6.283185307179586f * u2);
    p[i] = z * init.std;
  }
  return absl::OkStatus();
}

absl::Status InitLocalValue(const Parameter& param, uint64_t seed, Tensor& out) {
  if (out.shape() != param.shape()) {
    return InvalidArgument("local init target " + out.DebugString(),
                           "the parameter's local shape " + ShapeString(param.shape()));
  }
  const Shape& global = param.global_shape();
  const std::vector<int64_t>& off = param.local_offsets();
  const Shape& box = param.box_shape();
  const int nd = static_cast<int>(global.size());
  if (nd == 0 || out.numel() == 0) return InitParameterSlice(param, seed, 0, out);
  Tensor flat = out.View({out.numel()});
  // A padded shard's rows past the tensor's end stay zero.
  const int64_t real = param.box_numel();
  std::fill(out.data<float>() + real, out.data<float>() + out.numel(), 0.f);
  // Row by row: along the last dimension a local row is one contiguous run
  // of the global row-major order.
  const int64_t row = box[nd - 1];
  const int64_t rows = real / row;
  std::vector<int64_t> idx(nd, 0);  // local index of the row's first element
  for (int64_t r = 0; r < rows; ++r) {
    int64_t g = 0;
    for (int d = 0; d < nd; ++d) g = g * global[d] + off[d] + idx[d];
    Tensor dst = flat.Slice(0, r * row, (r + 1) * row);
    absl::Status s = InitParameterSlice(param, seed, g, dst);
    if (!s.ok()) return s;
    for (int d = nd - 2; d >= 0; --d) {  // next row
      if (++idx[d] < box[d]) break;
      idx[d] = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace weft
