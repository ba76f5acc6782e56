// GPT-2 family language model: token + position embedding, n_layer
// pre-norm transformer blocks, final LayerNorm, and an LM head tied to the
// token embedding (optional). Pure math: no ranks, meshes or strategies.
//
// GPT-2 initialisation: weights N(0, init_std), biases 0, LayerNorm 1/0,
// and the residual projections (attn.proj, mlp.proj) scaled by
// 1/sqrt(2 * n_layer). Parameter names follow the module tree:
// embed.wte, embed.wpe, blocks.{i}.{ln1,attn.qkv,attn.proj,ln2,mlp.fc,mlp.proj}, ln_f,
// lm_head.weight (untied only).
#ifndef WEFT_MODELS_GPT_GPT_H_
#define WEFT_MODELS_GPT_GPT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/nn/causal_lm.h"
#include "core/nn/embedding.h"
#include "core/nn/moe.h"
#include "models/gpt/gpt_config.pb.h"

namespace weft {

// The MoE layer a GPT config asks for (moe_every > 0).
MoeConfig MoeBlockConfig(const GptConfig& config);

class Gpt : public CausalLm {
 public:
  // Validates the config: heads divide d_model, sizes positive, seq_len
  // within max_seq_len, vocabulary known.
  static absl::StatusOr<std::unique_ptr<Gpt>> Create(const GptConfig& config, int64_t seq_len);

  // Forward gives logits (B*T, padded vocab); stages, probe inputs and
  // FLOPs are CausalLm's.
  TensorParallelPlan ParallelPlan() const override;
  absl::StatusOr<std::unique_ptr<Model>> CloneArchitecture() const override;

  const GptConfig& config() const { return config_; }
  int64_t padded_vocab() const { return padded_vocab_; }
  // Null once tp swapped it for its vocab-parallel version.
  TokenPositionEmbedding* embed() const {
    return dynamic_cast<TokenPositionEmbedding*>(child("embed"));
  }
  std::string Summary() const override;

 private:
  Gpt(const GptConfig& config, int64_t seq_len, int64_t padded_vocab);

  GptConfig config_;
  const int64_t seq_len_;
  const int64_t padded_vocab_;
};

}  // namespace weft

#endif  // WEFT_MODELS_GPT_GPT_H_
