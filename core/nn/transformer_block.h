// TransformerBlock (pre-norm):
//   r = x + attn(ln1(x));  out = r + mlp(ln2(r))
// The residual add before ln2 is fused with the normalization. The config
// constructor builds GPT-2's block; the parts constructor any other
// family's (Llama: RMSNorm, grouped-query attention, SwiGLU).
#ifndef WEFT_CORE_NN_TRANSFORMER_BLOCK_H_
#define WEFT_CORE_NN_TRANSFORMER_BLOCK_H_

#include "core/nn/attention.h"
#include "core/nn/layer_norm.h"
#include "core/nn/mlp.h"
#include "core/nn/module.h"

namespace weft {

struct TransformerBlockConfig {
  int64_t channels = 768;
  int num_heads = 12;
  int64_t mlp_hidden = 3072;
  float init_std = 0.02f;
  float proj_init_std = 0.02f;  // residual projections (attn.proj, mlp.proj)
  float dropout = 0.0f;
  float ln_eps = 1e-5f;
};

class TransformerBlock : public Module {
 public:
  explicit TransformerBlock(const TransformerBlockConfig& config);
  // attn and mlp map (B, T, C) to (B, T, C).
  TransformerBlock(std::unique_ptr<LayerNorm> ln1, std::unique_ptr<Module> attn,
                   std::unique_ptr<LayerNorm> ln2, std::unique_ptr<Module> mlp);

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  LayerNorm* ln1() const { return ln1_; }
  LayerNorm* ln2() const { return ln2_; }

 private:
  LayerNorm* ln1_;
  LayerNorm* ln2_;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_TRANSFORMER_BLOCK_H_
