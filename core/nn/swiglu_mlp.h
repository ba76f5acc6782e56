// SwiGluMlp (Llama's feed-forward): gate_up (C -> 2H, gate and up fused in
// one GEMM), silu(gate) * up, down (H -> C). No biases. gate_up and down
// are swappable: tensor parallelism splits gate_up by output features in two
// packed sections (each rank keeps matching gate and up columns) and down
// by input features.
#ifndef WEFT_CORE_NN_SWIGLU_MLP_H_
#define WEFT_CORE_NN_SWIGLU_MLP_H_

#include "core/nn/module.h"

namespace weft {

class SwiGluMlp : public Module {
 public:
  SwiGluMlp(int64_t channels, int64_t hidden, float init_std, float proj_init_std);

  // x (B, T, C) -> (B, T, C).
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

 private:
  enum { kGateUp };  // saved per micro-batch: gate_up's output
};

}  // namespace weft

#endif  // WEFT_CORE_NN_SWIGLU_MLP_H_
