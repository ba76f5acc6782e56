#include "core/nn/rope.h"

#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {
namespace {

absl::Status CheckScaling(const RopeScaling& s) {
  if (s.factor == 0) return absl::OkStatus();
  const auto missing = [](const char* field) {
    return InvalidArgument(absl::StrCat("rope scaling without ", field),
                           "a llama3 scaling block with factor, low_freq_factor, high_freq_factor "
                           "and original_max_position_embeddings, all > 0",
                           "copy the block from the model's config.json, or drop rope_scaling");
  };
  if (!(s.factor > 0)) return missing("a factor > 0");
  if (!(s.low_freq_factor > 0)) return missing("low_freq_factor");
  if (!(s.high_freq_factor > 0)) return missing("high_freq_factor");
  if (s.original_max_positions <= 0) return missing("original_max_position_embeddings");
  if (!(s.low_freq_factor < s.high_freq_factor)) {
    return InvalidArgument(absl::StrCat("rope scaling low_freq_factor=", s.low_freq_factor,
                                        " high_freq_factor=", s.high_freq_factor),
                           "low_freq_factor < high_freq_factor (Llama 3.1: 1 and 4)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<RopeTable>> RopeTable::Create(const RopeConfig& c) {
  if (c.head_dim < 2 || c.head_dim % 2 != 0) {
    return InvalidArgument(absl::StrCat("rotary head size ", c.head_dim),
                           "an even head size >= 2 (rotation pairs element i with i + D/2)");
  }
  if (!(c.theta > 1)) {
    return InvalidArgument(absl::StrCat("rope_theta=", c.theta), "rope_theta > 1",
                           "Llama 2 uses 10000, Llama 3 500000");
  }
  if (c.max_positions < 1) {
    return InvalidArgument(absl::StrCat("max_seq_len=", c.max_positions), ">= 1");
  }
  WEFT_RETURN_IF_ERROR(CheckScaling(c.scaling));
  return std::shared_ptr<RopeTable>(new RopeTable(c));
}

RopeTable::RopeTable(const RopeConfig& c) : config_(c) {
  const int64_t half = c.head_dim / 2;
  const RopeScaling& s = c.scaling;
  for (int64_t i = 0; i < half; ++i) {
    double f = std::pow(c.theta, -2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim));
    if (s.factor > 0) {
      // Llama 3.1: wavelengths beyond the original context / low_freq_factor
      // slow down by `factor`, those below / high_freq_factor stay, and the
      // band between blends the two linearly in context / wavelength.
      const double wavelen = 2 * std::numbers::pi / f;
      const double ctx = static_cast<double>(s.original_max_positions);
      const double low_wavelen = ctx / s.low_freq_factor, high_wavelen = ctx / s.high_freq_factor;
      if (wavelen > low_wavelen) {
        f /= s.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth =
            (ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1 - smooth) * f / s.factor + smooth * f;
      }
    }
    inv_freq_.push_back(f);
  }
}

absl::StatusOr<Tensor> RopeTable::On(const RunContext& ctx) {
  if (table_.defined() && table_.device() == ctx.device) return table_;
  const int64_t d = config_.head_dim, half = d / 2;
  std::vector<float> host(static_cast<size_t>(config_.max_positions * d));
  for (int64_t p = 0; p < config_.max_positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(p) * inv_freq_[i];
      host[p * d + i] = static_cast<float>(std::cos(a));
      host[p * d + half + i] = static_cast<float>(std::sin(a));
    }
  }
  WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::FromFloats(host, {config_.max_positions, d}));
  if (!ctx.device.is_cpu()) {
    WEFT_ASSIGN_OR_RETURN(t, t.To(ctx.device, ctx.stream));
  }
  table_ = t;
  return table_;
}

}  // namespace weft
