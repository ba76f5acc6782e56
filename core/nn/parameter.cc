#include "core/nn/parameter.h"

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

std::string Placement::ToString() const {
  switch (kind) {
    case Kind::kReplicate: return "Replicate";
    case Kind::kShard: return absl::StrCat("Shard(", dim, ")@", mesh_axis);
    case Kind::kPartial: return absl::StrCat("Partial@", mesh_axis);
  }
  return "?";
}

absl::Status InitParameterSlice(const Parameter& param, uint64_t seed, int64_t offset,
                                Tensor& out) {
  if (!out.device().is_cpu() || out.dtype() != DType::kF32 || !out.is_contiguous()) {
    return InvalidArgument("init target " + out.DebugString(), "a contiguous f32 CPU tensor");
  }
  if (offset < 0 || offset + out.numel() > param.numel()) {
    return InvalidArgument(absl::StrCat("init slice [", offset, ", ", offset + out.numel(),
                                        ") of ", param.name()),
                           absl::StrCat("a range inside [0, ", param.numel(), ")"));
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

}  // namespace weft
