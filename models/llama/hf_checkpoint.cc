#include "models/llama/hf_checkpoint.h"

#include <functional>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/safetensors.h"
#include "core/base/errors.h"
#include "core/base/json.h"
#include "core/base/status_macros.h"
#include "models/llama/llama.h"
#include "models/lm/hf_files.h"

namespace weft {
namespace {

// The mixture-of-experts fields of Mixtral's and Qwen3-MoE's config.json:
// every layer sparse, softmax routing (Mixtral's softmax over the top-k
// logits is the softmax renormalised over the k).
absl::Status ReadMoeFields(const HfConfig& hc, const LlamaConfig& base, LlamaConfig* m) {
  const std::string& arch = hc.architecture;
  const std::string& path = hc.path;
  const bool mixtral = arch == "MixtralForCausalLM";
  if (!mixtral && arch != "Qwen3MoeForCausalLM") return absl::OkStatus();
  // Qwen3-MoE's files on the Hub say num_experts; transformers 5 writes
  // num_local_experts, as Mixtral's.
  const char* experts_key =
      mixtral || HfField(hc, "num_local_experts") != nullptr ? "num_local_experts" : "num_experts";
  WEFT_ASSIGN_OR_RETURN(double experts, HfNumber(hc, experts_key));
  WEFT_ASSIGN_OR_RETURN(double top_k, HfNumber(hc, "num_experts_per_tok", std::nullopt));
  WEFT_ASSIGN_OR_RETURN(double hidden,
                        HfNumber(hc, mixtral ? "intermediate_size" : "moe_intermediate_size"));
  WEFT_ASSIGN_OR_RETURN(double aux, HfNumber(hc, "router_aux_loss_coef", 0.01));
  if (const JsonValue* j = HfField(hc, "router_jitter_noise"); j != nullptr && j->is_number() &&
                                                             j->number != 0) {
    return InvalidArgument(absl::StrCat(path, ": \"router_jitter_noise\": ", j->number),
                           "a router without jitter (weft's is deterministic)",
                           "set router_jitter_noise to 0 in config.json");
  }
  if (!mixtral) {
    // Qwen3-MoE may keep some layers dense: weft's MoE Llama is sparse everywhere.
    const JsonValue* step = HfField(hc, "decoder_sparse_step");
    const JsonValue* dense = HfField(hc, "mlp_only_layers");
    if ((step != nullptr && step->is_number() && step->number != 1) ||
        (dense != nullptr && dense->is_array() && !dense->array.empty())) {
      return InvalidArgument(absl::StrCat(path, ": dense layers between the sparse ones "
                                                "(decoder_sparse_step or mlp_only_layers)"),
                             "every layer a mixture of experts (decoder_sparse_step 1, no "
                             "mlp_only_layers)");
    }
  }
  bool normalize = true;
  if (const JsonValue* n = HfField(hc, "norm_topk_prob"); !mixtral && n != nullptr &&
                                                        n->kind == JsonValue::Kind::kBool) {
    normalize = n->boolean;
  }
  m->set_num_experts(static_cast<int>(experts));
  m->set_top_k(static_cast<int>(top_k));
  m->set_moe_ffn_hidden(static_cast<int>(hidden));
  m->set_norm_topk_prob(normalize);
  m->set_moe_aux_loss_coef(base.has_moe_aux_loss_coef() ? base.moe_aux_loss_coef()
                                                         : static_cast<float>(aux));
  // Training knobs config.json does not fix.
  m->set_capacity_factor(base.capacity_factor());
  m->set_moe_z_loss_coef(base.moe_z_loss_coef());
  m->set_moe_routing_groups(base.moe_routing_groups());
  WEFT_RETURN_IF_ERROR(HfAgree(base.has_num_experts(), base.num_experts(), m->num_experts(),
                             "num_experts", experts_key, hc));
  WEFT_RETURN_IF_ERROR(HfAgree(base.has_top_k(), base.top_k(), m->top_k(), "top_k",
                             "num_experts_per_tok", hc));
  WEFT_RETURN_IF_ERROR(HfAgree(base.has_moe_ffn_hidden(), base.moe_ffn_hidden(),
                             m->moe_ffn_hidden(), "moe_ffn_hidden",
                             mixtral ? "intermediate_size" : "moe_intermediate_size", hc));
  return HfAgree(base.has_norm_topk_prob(), base.norm_topk_prob(), m->norm_topk_prob(),
               "norm_topk_prob", "norm_topk_prob", hc);
}

using TakeFn = std::function<absl::StatusOr<ckpt::HostTensor>(const std::string&)>;
using HasFn = std::function<bool(const std::string&)>;

// gate's rows, then up's: weft's packed gate_up.
absl::StatusOr<ckpt::HostTensor> StackRows(ckpt::HostTensor gate, const ckpt::HostTensor& up,
                                           const std::string& what) {
  if (gate.shape != up.shape || gate.shape.size() != 2) {
    return InvalidArgument(absl::StrCat(what, ": gate and up projection shapes differ"),
                           "equal (intermediate_size, hidden_size) matrices");
  }
  gate.values.insert(gate.values.end(), up.values.begin(), up.values.end());
  gate.shape[0] *= 2;
  return gate;
}

absl::Status ExpectShape(const ckpt::HostTensor& t, const std::vector<int64_t>& want,
                         const std::string& name) {
  if (t.shape == want) return absl::OkStatus();
  return InvalidArgument(absl::StrCat(name, " is ", absl::StrJoin(t.shape, "x")),
                         absl::StrCat(absl::StrJoin(want, "x"), " for config.json's shape"),
                         "a config.json that matches the weights");
}

// One layer's router and experts into weft's MoeLayer names. Mixtral's
// Hub files keep block_sparse_moe.experts.J.{w1 (gate), w3 (up), w2
// (down)}, Qwen3-MoE's mlp.experts.J.{gate,up,down}_proj; transformers 5
// stores each layer's experts fused, mlp.experts.gate_up_proj (E, 2H, C)
// and down_proj (E, C, H).
absl::Status TakeExperts(const std::string& hf_pre, const std::string& pre,
                         const LlamaConfig& config, const TakeFn& take, const HasFn& has,
                         std::map<std::string, ckpt::HostTensor>* out) {
  const int64_t e = config.num_experts(), c = config.d_model();
  const int64_t h = LlamaMoeConfig(config).hidden;
  const std::string moe = has(hf_pre + "block_sparse_moe.gate.weight") ? hf_pre + "block_sparse_moe."
                                                                       : hf_pre + "mlp.";
  WEFT_ASSIGN_OR_RETURN(ckpt::HostTensor router, take(moe + "gate.weight"));
  WEFT_RETURN_IF_ERROR(ExpectShape(router, {e, c}, moe + "gate.weight"));
  (*out)[pre + "mlp.router.weight"] = std::move(router);
  ckpt::HostTensor gate_up{.shape = {e, 2, h, c}}, down{.shape = {e, c, h}};
  if (has(moe + "experts.gate_up_proj")) {
    WEFT_ASSIGN_OR_RETURN(ckpt::HostTensor gu, take(moe + "experts.gate_up_proj"));
    WEFT_RETURN_IF_ERROR(ExpectShape(gu, {e, 2 * h, c}, moe + "experts.gate_up_proj"));
    WEFT_ASSIGN_OR_RETURN(ckpt::HostTensor d, take(moe + "experts.down_proj"));
    WEFT_RETURN_IF_ERROR(ExpectShape(d, {e, c, h}, moe + "experts.down_proj"));
    gate_up.values = std::move(gu.values);
    down.values = std::move(d.values);
  } else {
    const bool mixtral = has(moe + "experts.0.w1.weight");
    for (int64_t j = 0; j < e; ++j) {
      const std::string x = absl::StrCat(moe, "experts.", j, ".");
      WEFT_ASSIGN_OR_RETURN(ckpt::HostTensor g, take(x + (mixtral ? "w1.weight" : "gate_proj.weight")));
      WEFT_ASSIGN_OR_RETURN(ckpt::HostTensor u, take(x + (mixtral ? "w3.weight" : "up_proj.weight")));
      WEFT_ASSIGN_OR_RETURN(ckpt::HostTensor d, take(x + (mixtral ? "w2.weight" : "down_proj.weight")));
      WEFT_RETURN_IF_ERROR(ExpectShape(g, {h, c}, x + "gate"));
      WEFT_RETURN_IF_ERROR(ExpectShape(d, {c, h}, x + "down"));
      WEFT_ASSIGN_OR_RETURN(ckpt::HostTensor gu, StackRows(std::move(g), u, x));
      gate_up.values.insert(gate_up.values.end(), gu.values.begin(), gu.values.end());
      down.values.insert(down.values.end(), d.values.begin(), d.values.end());
    }
  }
  (*out)[pre + "mlp.experts.gate_up_weight"] = std::move(gate_up);
  (*out)[pre + "mlp.experts.down_weight"] = std::move(down);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LlamaConfig> ReadHfLlamaConfig(const std::string& dir, const LlamaConfig& base) {
  WEFT_ASSIGN_OR_RETURN(const HfConfig hc, ReadHfConfig(dir));
  const JsonValue& c = hc.json;
  const std::string& path = hc.path;
  const std::string& arch = hc.architecture;
  static const std::set<std::string> kKnown = {"LlamaForCausalLM", "MistralForCausalLM",
                                               "Qwen3ForCausalLM", "MixtralForCausalLM",
                                               "Qwen3MoeForCausalLM"};
  if (kKnown.count(arch) == 0) {
    return InvalidArgument(absl::StrCat(path, " describes \"", arch.empty() ? "no architecture" : arch,
                                        "\""),
                           "LlamaForCausalLM, MistralForCausalLM, Qwen3ForCausalLM, "
                           "MixtralForCausalLM or Qwen3MoeForCausalLM",
                           "a GPT-2 checkpoint trains with //models/gpt:train");
  }
  for (const char* flag : {"attention_bias", "mlp_bias"}) {
    if (const JsonValue* b = c.Find(flag); b != nullptr && b->kind == JsonValue::Kind::kBool &&
                                           b->boolean) {
      return InvalidArgument(absl::StrCat(path, ": \"", flag, "\": true"),
                             "a model without biases (weft's Llama has none)");
    }
  }
  LlamaConfig m;
  WEFT_ASSIGN_OR_RETURN(double layers, HfNumber(hc, "num_hidden_layers", std::nullopt));
  WEFT_ASSIGN_OR_RETURN(double heads, HfNumber(hc, "num_attention_heads", std::nullopt));
  WEFT_ASSIGN_OR_RETURN(double width, HfNumber(hc, "hidden_size", std::nullopt));
  WEFT_ASSIGN_OR_RETURN(double kv, HfNumber(hc, "num_key_value_heads", heads));
  WEFT_ASSIGN_OR_RETURN(double head_dim, HfNumber(hc, "head_dim", width / heads));
  WEFT_ASSIGN_OR_RETURN(double ffn, HfNumber(hc, "intermediate_size", std::nullopt));
  WEFT_ASSIGN_OR_RETURN(double vocab, HfNumber(hc, "vocab_size", std::nullopt));
  WEFT_ASSIGN_OR_RETURN(double positions, HfNumber(hc, "max_position_embeddings", std::nullopt));
  WEFT_ASSIGN_OR_RETURN(double eps, HfNumber(hc, "rms_norm_eps", 1e-6));
  m.set_n_layer(static_cast<int>(layers));
  m.set_n_head(static_cast<int>(heads));
  m.set_n_kv_head(static_cast<int>(kv));
  m.set_d_model(static_cast<int>(width));
  m.set_head_dim(static_cast<int>(head_dim));
  m.set_ffn_hidden(static_cast<int>(ffn));
  m.set_vocab_size(static_cast<int>(vocab));
  m.set_max_seq_len(base.has_max_seq_len() ? base.max_seq_len() : static_cast<int>(positions));
  m.set_norm_eps(static_cast<float>(eps));
  m.set_vocab_pad_multiple(base.vocab_pad_multiple());
  m.set_init_std(base.init_std());
  m.set_qk_norm(arch == "Qwen3ForCausalLM" || arch == "Qwen3MoeForCausalLM");
  WEFT_RETURN_IF_ERROR(ReadMoeFields(hc, base, &m));
  const JsonValue* tie = c.Find("tie_word_embeddings");
  m.set_tie_weights(tie != nullptr && tie->kind == JsonValue::Kind::kBool && tie->boolean);
  // Rotary parameters: transformers 4 writes rope_theta and rope_scaling,
  // transformers 5 one rope_parameters block holding both.
  const JsonValue* rope = c.Find("rope_parameters");
  if (rope == nullptr || !rope->is_object()) rope = c.Find("rope_scaling");
  double theta = 10000;
  if (const JsonValue* t = c.Find("rope_theta"); t != nullptr && t->is_number()) theta = t->number;
  if (rope != nullptr && rope->is_object()) {
    if (const JsonValue* t = rope->Find("rope_theta"); t != nullptr && t->is_number()) {
      theta = t->number;
    }
    const JsonValue* type = rope->Find("rope_type");
    if (type == nullptr) type = rope->Find("type");
    const std::string kind = type != nullptr && type->is_string() ? type->string : "default";
    if (kind == "llama3") {
      RopeScalingConfig* s = m.mutable_rope_scaling();
      s->set_rope_type("llama3");
      for (const auto& [key, set] :
           std::vector<std::pair<const char*, std::function<void(double)>>>{
               {"factor", [s](double v) { s->set_factor(v); }},
               {"low_freq_factor", [s](double v) { s->set_low_freq_factor(v); }},
               {"high_freq_factor", [s](double v) { s->set_high_freq_factor(v); }},
               {"original_max_position_embeddings",
                [s](double v) { s->set_original_max_position_embeddings(static_cast<int>(v)); }}}) {
        if (const JsonValue* v = rope->Find(key); v != nullptr && v->is_number()) set(v->number);
      }
    } else if (kind != "default") {
      return InvalidArgument(absl::StrCat(path, ": rope_type \"", kind, "\""),
                             "\"default\" or \"llama3\" rotary embeddings");
    }
  }
  m.set_rope_theta(theta);
  // Mistral's sliding window only matters past it.
  if (const JsonValue* w = c.Find("sliding_window"); w != nullptr && w->is_number() &&
                                                     w->number < m.max_seq_len()) {
    const JsonValue* use = c.Find("use_sliding_window");
    if (use == nullptr || use->kind != JsonValue::Kind::kBool || use->boolean) {
      return InvalidArgument(
          absl::StrCat(path, ": a sliding window of ", w->number, " tokens, max_seq_len ",
                       m.max_seq_len()),
          "full causal attention (weft has no sliding window)",
          absl::StrCat("--max_seq_len=", static_cast<int>(w->number), " or less makes them equal"));
    }
  }
  WEFT_RETURN_IF_ERROR(HfAgree(base.has_n_layer(), base.n_layer(), m.n_layer(), "n_layer",
                             "num_hidden_layers", hc));
  WEFT_RETURN_IF_ERROR(
      HfAgree(base.has_n_head(), base.n_head(), m.n_head(), "n_head", "num_attention_heads", hc));
  WEFT_RETURN_IF_ERROR(HfAgree(base.has_n_kv_head(), base.n_kv_head(), m.n_kv_head(), "n_kv_head",
                             "num_key_value_heads", hc));
  WEFT_RETURN_IF_ERROR(
      HfAgree(base.has_d_model(), base.d_model(), m.d_model(), "d_model", "hidden_size", hc));
  WEFT_RETURN_IF_ERROR(HfAgree(base.has_ffn_hidden(), base.ffn_hidden(), m.ffn_hidden(),
                             "ffn_hidden", "intermediate_size", hc));
  WEFT_RETURN_IF_ERROR(HfAgree(base.has_vocab_size(), base.vocab_size(), m.vocab_size(),
                             "vocab_size", "vocab_size", hc));
  WEFT_RETURN_IF_ERROR(HfAgree(base.has_tie_weights(), base.tie_weights(), m.tie_weights(),
                             "tie_weights", "tie_word_embeddings", hc));
  WEFT_RETURN_IF_ERROR(HfAgree(base.has_rope_theta(), base.rope_theta(), m.rope_theta(),
                             "rope_theta", "rope_theta", hc));
  WEFT_RETURN_IF_ERROR(
      HfAgree(base.has_qk_norm(), base.qk_norm(), m.qk_norm(), "qk_norm", "architectures", hc));
  return m;
}

absl::StatusOr<std::map<std::string, ckpt::HostTensor>> ReadHfLlamaWeights(
    const std::string& dir, const LlamaConfig& config) {
  WEFT_ASSIGN_OR_RETURN(auto hf, ReadHfTensors(dir));
  std::map<std::string, ckpt::HostTensor> out;
  std::set<std::string> used;
  auto take = [&](const std::string& name) -> absl::StatusOr<ckpt::HostTensor> {
    auto it = hf.find(name);
    if (it == hf.end()) {
      return NotFound(absl::StrCat(dir, " has no tensor ", name),
                      "every tensor of the architecture config.json names",
                      "a checkpoint written by transformers' save_pretrained");
    }
    used.insert(name);
    return it->second;
  };
  auto has = [&](const std::string& name) { return hf.count(name) > 0; };
  // Vocabulary rows padded with zeros to weft's padded vocabulary.
  const int64_t m = config.vocab_pad_multiple();
  const int64_t padded = (config.vocab_size() + m - 1) / m * m;
  auto padded_rows = [&](ckpt::HostTensor t) {
    const int64_t c = t.shape[1];
    t.values.resize(padded * c, 0.f);
    t.shape[0] = padded;
    return t;
  };
  WEFT_ASSIGN_OR_RETURN(ckpt::HostTensor wte, take("model.embed_tokens.weight"));
  out["embed.wte"] = padded_rows(std::move(wte));
  for (int l = 0; l < config.n_layer(); ++l) {
    const std::string hf_pre = absl::StrCat("model.layers.", l, ".");
    const std::string pre = absl::StrCat("blocks.", l, ".");
    for (const auto& [from, to] : std::vector<std::pair<const char*, const char*>>{
             {"input_layernorm.weight", "ln1.weight"},
             {"post_attention_layernorm.weight", "ln2.weight"},
             {"self_attn.q_proj.weight", "attn.q.weight"},
             {"self_attn.k_proj.weight", "attn.k.weight"},
             {"self_attn.v_proj.weight", "attn.v.weight"},
             {"self_attn.o_proj.weight", "attn.proj.weight"}}) {
      WEFT_ASSIGN_OR_RETURN(out[pre + to], take(hf_pre + from));
    }
    if (config.qk_norm()) {
      WEFT_ASSIGN_OR_RETURN(out[pre + "attn.q_norm.weight"], take(hf_pre + "self_attn.q_norm.weight"));
      WEFT_ASSIGN_OR_RETURN(out[pre + "attn.k_norm.weight"], take(hf_pre + "self_attn.k_norm.weight"));
    }
    if (LlamaIsMoe(config)) {
      WEFT_RETURN_IF_ERROR(TakeExperts(hf_pre, pre, config, take, has, &out));
      continue;
    }
    WEFT_ASSIGN_OR_RETURN(out[pre + "mlp.down.weight"], take(hf_pre + "mlp.down_proj.weight"));
    // gate_up holds gate's rows, then up's.
    WEFT_ASSIGN_OR_RETURN(ckpt::HostTensor gate, take(hf_pre + "mlp.gate_proj.weight"));
    WEFT_ASSIGN_OR_RETURN(ckpt::HostTensor up, take(hf_pre + "mlp.up_proj.weight"));
    WEFT_ASSIGN_OR_RETURN(out[pre + "mlp.gate_up.weight"],
                          StackRows(std::move(gate), up, hf_pre + "mlp"));
  }
  WEFT_ASSIGN_OR_RETURN(out["ln_f.weight"], take("model.norm.weight"));
  if (!config.tie_weights()) {
    WEFT_ASSIGN_OR_RETURN(ckpt::HostTensor head, take("lm_head.weight"));
    out["lm_head.weight"] = padded_rows(std::move(head));
  } else if (hf.count("lm_head.weight") > 0) {
    used.insert("lm_head.weight");  // a tied checkpoint may store the copy
  }
  std::vector<std::string> extra;
  for (const auto& [name, t] : hf) {
    if (used.count(name) == 0 && !absl::StrContains(name, "rotary_emb")) extra.push_back(name);
  }
  if (!extra.empty()) {
    return InvalidArgument(absl::StrCat(dir, " has tensors the model does not use: ",
                                        absl::StrJoin(extra, ", ")),
                           "exactly the tensors of the architecture config.json names",
                           "a config.json that matches the weights");
  }
  return out;
}

}  // namespace weft

namespace weft {
namespace {

// Rows [begin, end) of a row-major tensor of `cols` columns, as (rows, cols).
ckpt::HostTensor Rows(const ckpt::HostTensor& t, int64_t begin, int64_t end, int64_t cols) {
  return {.shape = {end - begin, cols},
          .values = std::vector<float>(t.values.begin() + begin * cols,
                                       t.values.begin() + end * cols)};
}

std::string Num(double v) { return absl::StrCat(v); }

}  // namespace

absl::StatusOr<HfExport> ToHfLlama(const LlamaConfig& config,
                                   const std::map<std::string, ckpt::HostTensor>& weights,
                                   const std::string& dtype) {
  const bool moe = LlamaIsMoe(config);
  const MoeConfig m = moe ? LlamaMoeConfig(config) : MoeConfig();
  if (moe && (config.router_score() != "softmax" || config.shared_expert_hidden() > 0)) {
    return FailedPrecondition(
        absl::StrCat("a Llama mixture of experts with ",
                     config.shared_expert_hidden() > 0 ? "a shared expert" : "sigmoid routing"),
        "softmax routing without shared experts (Mixtral's and Qwen3-MoE's, the MoE "
        "architectures exported)",
        "export it with --format=safetensors instead");
  }
  if (moe && !config.qk_norm() && !config.norm_topk_prob()) {
    return FailedPrecondition("a Llama mixture of experts with raw gates and no QK-norm",
                              "Mixtral renormalises its gates (Qwen3-MoE, with QK-norm, may not)",
                              "export it with --format=safetensors instead");
  }
  const std::string arch = moe ? (config.qk_norm() ? "Qwen3MoeForCausalLM" : "MixtralForCausalLM")
                               : (config.qk_norm() ? "Qwen3ForCausalLM" : "LlamaForCausalLM");
  const bool mixtral = arch == "MixtralForCausalLM";
  const int64_t c = config.d_model(), v = config.vocab_size(), f = LlamaFfnHidden(config);
  HfExport out;
  auto get = [&](const std::string& name) -> absl::StatusOr<const ckpt::HostTensor*> {
    const auto it = weights.find(name);
    if (it == weights.end()) {
      return NotFound(absl::StrCat("the checkpoint has no ", name), "every Llama parameter");
    }
    return &it->second;
  };
  WEFT_ASSIGN_OR_RETURN(const ckpt::HostTensor* wte, get("embed.wte"));
  out.tensors["model.embed_tokens.weight"] = Rows(*wte, 0, v, c);  // padding rows dropped
  for (int l = 0; l < config.n_layer(); ++l) {
    const std::string h = absl::StrCat("model.layers.", l, "."), b = absl::StrCat("blocks.", l, ".");
    std::vector<std::pair<std::string, std::string>> same = {
        {"ln1.weight", "input_layernorm.weight"},
        {"ln2.weight", "post_attention_layernorm.weight"},
        {"attn.q.weight", "self_attn.q_proj.weight"},
        {"attn.k.weight", "self_attn.k_proj.weight"},
        {"attn.v.weight", "self_attn.v_proj.weight"},
        {"attn.proj.weight", "self_attn.o_proj.weight"}};
    if (config.qk_norm()) {
      same.push_back({"attn.q_norm.weight", "self_attn.q_norm.weight"});
      same.push_back({"attn.k_norm.weight", "self_attn.k_norm.weight"});
    }
    for (const auto& [from, to] : same) {
      WEFT_ASSIGN_OR_RETURN(const ckpt::HostTensor* t, get(b + from));
      out.tensors[h + to] = *t;
    }
    if (!moe) {
      WEFT_ASSIGN_OR_RETURN(const ckpt::HostTensor* gu, get(b + "mlp.gate_up.weight"));
      WEFT_ASSIGN_OR_RETURN(const ckpt::HostTensor* down, get(b + "mlp.down.weight"));
      out.tensors[h + "mlp.gate_proj.weight"] = Rows(*gu, 0, f, c);
      out.tensors[h + "mlp.up_proj.weight"] = Rows(*gu, f, 2 * f, c);
      out.tensors[h + "mlp.down_proj.weight"] = *down;
      continue;
    }
    const std::string moe_pre = h + (mixtral ? "block_sparse_moe." : "mlp.");
    WEFT_ASSIGN_OR_RETURN(const ckpt::HostTensor* router, get(b + "mlp.router.weight"));
    out.tensors[moe_pre + "gate.weight"] = *router;
    WEFT_ASSIGN_OR_RETURN(const ckpt::HostTensor* gu, get(b + "mlp.experts.gate_up_weight"));
    WEFT_ASSIGN_OR_RETURN(const ckpt::HostTensor* down, get(b + "mlp.experts.down_weight"));
    const int64_t hid = m.hidden;
    for (int64_t j = 0; j < m.num_experts; ++j) {
      const std::string x = absl::StrCat(moe_pre, "experts.", j, ".");
      // gate_up (E, 2, H, C): expert j's gate rows, then its up rows.
      out.tensors[x + (mixtral ? "w1.weight" : "gate_proj.weight")] =
          Rows(*gu, 2 * j * hid, (2 * j + 1) * hid, c);
      out.tensors[x + (mixtral ? "w3.weight" : "up_proj.weight")] =
          Rows(*gu, (2 * j + 1) * hid, (2 * j + 2) * hid, c);
      out.tensors[x + (mixtral ? "w2.weight" : "down_proj.weight")] = Rows(*down, j * c, (j + 1) * c, hid);
    }
  }
  WEFT_ASSIGN_OR_RETURN(const ckpt::HostTensor* norm, get("ln_f.weight"));
  out.tensors["model.norm.weight"] = *norm;
  if (!config.tie_weights()) {
    WEFT_ASSIGN_OR_RETURN(const ckpt::HostTensor* head, get("lm_head.weight"));
    out.tensors["lm_head.weight"] = Rows(*head, 0, v, c);
  }
  const std::string model_type = arch == "LlamaForCausalLM"   ? "llama"
                                 : arch == "Qwen3ForCausalLM" ? "qwen3"
                                 : mixtral                    ? "mixtral"
                                                              : "qwen3_moe";
  std::string j = absl::StrCat(
      "{\n  \"architectures\": [\"", arch, "\"],\n  \"model_type\": \"", model_type, "\",\n",
      "  \"hidden_act\": \"silu\",\n  \"hidden_size\": ", c, ",\n  \"intermediate_size\": ",
      mixtral ? m.hidden : f, ",\n  \"num_hidden_layers\": ", config.n_layer(),
      ",\n  \"num_attention_heads\": ", config.n_head(), ",\n  \"num_key_value_heads\": ",
      LlamaKvHeads(config), ",\n  \"head_dim\": ", LlamaHeadDim(config), ",\n  \"vocab_size\": ", v,
      ",\n  \"max_position_embeddings\": ", config.max_seq_len(), ",\n  \"rms_norm_eps\": ",
      Num(config.norm_eps()), ",\n  \"rope_theta\": ", Num(config.rope_theta()),
      ",\n  \"tie_word_embeddings\": ", config.tie_weights() ? "true" : "false",
      ",\n  \"attention_bias\": false,\n  \"mlp_bias\": false,\n  \"initializer_range\": ",
      Num(config.init_std()), ",\n  \"sliding_window\": null,\n  \"use_sliding_window\": false");
  if (config.has_rope_scaling()) {
    const RopeScalingConfig& s = config.rope_scaling();
    absl::StrAppend(&j, ",\n  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": ",
                    Num(s.factor()), ", \"low_freq_factor\": ", Num(s.low_freq_factor()),
                    ", \"high_freq_factor\": ", Num(s.high_freq_factor()),
                    ", \"original_max_position_embeddings\": ",
                    s.original_max_position_embeddings(), "}");
  }
  if (moe) {
    absl::StrAppend(&j, ",\n  \"", mixtral ? "num_local_experts" : "num_experts", "\": ",
                    m.num_experts, ",\n  \"num_experts_per_tok\": ", m.top_k,
                    ",\n  \"router_aux_loss_coef\": ", Num(m.aux_loss_coef),
                    ",\n  \"router_jitter_noise\": 0.0");
    if (!mixtral) {
      absl::StrAppend(&j, ",\n  \"moe_intermediate_size\": ", m.hidden,
                      ",\n  \"norm_topk_prob\": ", config.norm_topk_prob() ? "true" : "false",
                      ",\n  \"decoder_sparse_step\": 1,\n  \"mlp_only_layers\": []");
    }
  }
  absl::StrAppend(&j, ",\n  \"torch_dtype\": \"", HfTorchDtype(dtype), "\"\n}\n");
  out.config_json = std::move(j);
  return out;
}

}  // namespace weft
