#include "tests/tiny_llama.h"

#include "models/llama/llama.h"

namespace weft::testing {

LlamaConfig TinyLlamaConfig(bool tied, bool qk_norm) {
  LlamaConfig c;
  c.set_n_layer(2);
  c.set_n_head(4);
  c.set_n_kv_head(2);
  c.set_d_model(32);
  c.set_ffn_hidden(48);
  c.set_max_seq_len(16);
  c.set_vocab_pad_multiple(8);
  c.set_rope_theta(10000);
  c.set_tie_weights(tied);
  c.set_qk_norm(qk_norm);
  return c;
}

LlamaConfig TinyLlamaMoeConfig(const std::string& variant) {
  LlamaConfig c = TinyLlamaConfig(/*tied=*/false, /*qk_norm=*/variant == "qwen3");
  c.set_num_experts(4);
  c.set_top_k(2);
  c.set_moe_ffn_hidden(32);
  c.set_moe_aux_loss_coef(0.01f);
  c.set_moe_z_loss_coef(0.001f);
  if (variant == "sigmoid_shared") {
    c.set_router_score("sigmoid");
    c.set_moe_z_loss_coef(0);
    c.set_shared_expert_hidden(24);
  } else if (variant == "qwen3") {
    c.set_num_experts(8);
    c.set_top_k(4);
    c.set_moe_ffn_hidden(16);
    c.set_norm_topk_prob(false);
  }
  return c;
}

std::function<absl::StatusOr<std::unique_ptr<Model>>(const DataLoaders&)> LlamaModelFactory(
    const LlamaConfig& config, int64_t seq_len) {
  return [config, seq_len](const DataLoaders& d) -> absl::StatusOr<std::unique_ptr<Model>> {
    LlamaConfig c = config;
    if (c.vocab_size() == 0) c.set_vocab_size(static_cast<int32_t>(d.vocab_size));
    absl::StatusOr<std::unique_ptr<Llama>> m = Llama::Create(c, seq_len);
    if (!m.ok()) return m.status();
    return std::unique_ptr<Model>(std::move(*m));
  };
}

}  // namespace weft::testing
