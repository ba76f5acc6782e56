// ExpertMlps: E independent GPT-2 MLPs (fc with GELU, proj) applied to a
// buffer of token rows grouped by expert, through grouped GEMMs.
//
// Parameters are stacked over experts: fc_weight (E, H, C), fc_bias (E, H),
// proj_weight (E, C, H), proj_bias (E, C). The expert strategy shards dim 0;
// the module serves whatever experts its local shape holds (the first
// dimension of fc_weight), and ExpertOffset() says which.
#ifndef WEFT_CORE_NN_EXPERT_MLPS_H_
#define WEFT_CORE_NN_EXPERT_MLPS_H_

#include <cstdint>
#include <vector>

#include "core/nn/module.h"

namespace weft {

class ExpertMlps : public Module {
 public:
  ExpertMlps(int num_experts, int64_t channels, int64_t hidden, float init_std,
             float proj_init_std);

  // x (M, C) grouped by local expert with `counts` rows each -> (M, C).
  absl::StatusOr<Tensor> ForwardGrouped(RunContext& ctx, const Tensor& x,
                                        const std::vector<int64_t>& counts);
  // dy (M, C) -> dx (M, C); accumulates the experts' gradients.
  absl::StatusOr<Tensor> BackwardGrouped(RunContext& ctx, const Tensor& dy);

  // Grouped rows need their counts: plain Forward is an error.
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  // Experts held here, and the global index of the first.
  int num_local_experts() const { return static_cast<int>(fc_weight_->shape()[0]); }
  int num_experts() const { return static_cast<int>(fc_weight_->global_shape()[0]); }
  int expert_offset() const { return static_cast<int>(fc_weight_->local_offsets()[0]); }
  std::vector<Parameter*> expert_parameters() const {
    return {fc_weight_, fc_bias_, proj_weight_, proj_bias_};
  }

 private:
  enum { kInput, kPreActivation, kHidden, kCounts };
  const int64_t channels_, hidden_;
  Parameter* fc_weight_;
  Parameter* fc_bias_;
  Parameter* proj_weight_;
  Parameter* proj_bias_;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_EXPERT_MLPS_H_
