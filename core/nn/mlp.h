// MLP: fc (C -> hidden, GELU fused in the GEMM epilogue), proj (hidden -> C),
// residual dropout. Its backward fuses GELU's derivative and fc's bias
// gradient into proj's dx GEMM (see Linear::FuseGeluBackwardInto) when both
// are plain Linear layers; fc and proj are swappable, so tensor parallelism
// can replace them with column- and row-parallel versions.
#ifndef WEFT_CORE_NN_MLP_H_
#define WEFT_CORE_NN_MLP_H_

#include "core/nn/dropout.h"
#include "core/nn/linear.h"
#include "core/nn/module.h"

namespace weft {

class Mlp : public Module {
 public:
  Mlp(int64_t channels, int64_t hidden, float init_std, float proj_init_std, float dropout);

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  // Null once a strategy swapped them for another kind of layer.
  Linear* fc() const { return dynamic_cast<Linear*>(child("fc")); }
  Linear* proj() const { return dynamic_cast<Linear*>(child("proj")); }

 private:
  Dropout* dropout_;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_MLP_H_
