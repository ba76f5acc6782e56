// Llama-family language model: token embedding, n_layer pre-norm blocks
// (RMSNorm, grouped-query attention with rotary positions, SwiGLU), a final
// RMSNorm and an output head, tied to the embedding or not. No biases, no
// position table. Pure math: no ranks, meshes or strategies.
//
// Initialisation: weights N(0, init_std), norms 1, and the residual
// projections (attn.proj, mlp.down) scaled by 1/sqrt(2 * n_layer), as GPT's.
// Parameter names: embed.wte, blocks.{i}.{ln1, attn.{q,k,v,proj}, ln2,
// mlp.{gate_up,down}}, ln_f, lm_head.weight (untied only). gate_up holds
// the gate projection's rows, then the up projection's.
//
// The mixture-of-experts variant (num_experts > 0: Mixtral, Qwen3-MoE)
// replaces every block's MLP with a MoeLayer of SwiGLU experts:
// blocks.{i}.mlp.{router.weight, experts.{gate_up_weight (E, 2, H, C),
// down_weight (E, C, H)}, shared.{gate_up,down}.weight (a shared expert only)}.
#ifndef WEFT_MODELS_LLAMA_LLAMA_H_
#define WEFT_MODELS_LLAMA_LLAMA_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/nn/causal_lm.h"
#include "core/nn/moe.h"
#include "core/nn/rope.h"
#include "models/llama/llama_config.pb.h"

namespace weft {

// The SwiGLU hidden size `config` asks for (ffn_hidden, or Meta's rule).
int64_t LlamaFfnHidden(const LlamaConfig& config);
// n_kv_head with 0 resolved to n_head, and head_dim with 0 to d_model / n_head.
int LlamaKvHeads(const LlamaConfig& config);
int64_t LlamaHeadDim(const LlamaConfig& config);
// Whether the blocks' MLPs are mixtures of experts, and their layer config.
bool LlamaIsMoe(const LlamaConfig& config);
MoeConfig LlamaMoeConfig(const LlamaConfig& config);

class Llama : public CausalLm {
 public:
  // Validates the config: heads divisible by n_kv_head, head size even,
  // sizes positive, seq_len within max_seq_len, the RoPE scaling block whole.
  static absl::StatusOr<std::unique_ptr<Llama>> Create(const LlamaConfig& config,
                                                       int64_t seq_len);

  // q, k, v and gate_up split by output features (whole heads per rank;
  // K/V heads fewer than tp replicated on the ranks of their query heads;
  // gate_up in two packed sections), the projections by input features,
  // the vocabulary in the embedding, head and loss; norms on sequence
  // shards under sequence parallelism.
  TensorParallelPlan ParallelPlan() const override;
  absl::StatusOr<std::unique_ptr<Model>> CloneArchitecture() const override;
  std::string Summary() const override;

  const LlamaConfig& config() const { return config_; }
  int64_t padded_vocab() const { return padded_vocab_; }

 private:
  Llama(const LlamaConfig& config, int64_t seq_len, int64_t padded_vocab,
        std::shared_ptr<RopeTable> rope);

  LlamaConfig config_;
  const int64_t seq_len_;
  const int64_t padded_vocab_;
};

}  // namespace weft

#endif  // WEFT_MODELS_LLAMA_LLAMA_H_
