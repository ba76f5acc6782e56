// Rotary position embedding tables (RoPE, Su et al.), shared by every
// attention layer of a model: row p holds cos(p * f_i) for the D/2
// frequencies f_i = theta^(-2i/D), then sin(p * f_i), as RopeQkvForward
// reads them. Llama 3.1's frequency scaling ("rope_type": "llama3") divides
// the low frequencies by `factor` and blends the band between them.
#ifndef WEFT_CORE_NN_ROPE_H_
#define WEFT_CORE_NN_ROPE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/nn/run_context.h"

namespace weft {

struct RopeScaling {
  float factor = 0;  // 0: no scaling
  float low_freq_factor = 0;
  float high_freq_factor = 0;
  int64_t original_max_positions = 0;
};

struct RopeConfig {
  int64_t head_dim = 64;
  int64_t max_positions = 2048;
  double theta = 10000.0;
  RopeScaling scaling;
};

class RopeTable {
 public:
  // Refuses an odd head size, theta <= 1, and a scaling block with a field
  // missing or out of order (low_freq_factor < high_freq_factor).
  static absl::StatusOr<std::shared_ptr<RopeTable>> Create(const RopeConfig& config);

  // The D/2 inverse frequencies, scaled.
  const std::vector<double>& inverse_frequencies() const { return inv_freq_; }
  const RopeConfig& config() const { return config_; }
  // The (max_positions, D) f32 table on ctx.device, built on first use
  // there and kept (one device at a time).
  absl::StatusOr<Tensor> On(const RunContext& ctx);

 private:
  explicit RopeTable(const RopeConfig& config);

  RopeConfig config_;
  std::vector<double> inv_freq_;
  Tensor table_;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_ROPE_H_
