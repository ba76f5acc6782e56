#include "models/gpt/hf_gpt2.h"

#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {
namespace {

// A string field that must be `want` when present.
absl::Status ExpectString(const HfConfig& c, const char* key, const char* want,
                          const char* expected) {
  const JsonValue* v = HfField(c, key);
  if (v == nullptr || (v->is_string() && v->string == want)) return absl::OkStatus();
  return InvalidArgument(absl::StrCat(c.path, ": \"", key, "\": ",
                                      v->is_string() ? absl::StrCat("\"", v->string, "\"") : "?"),
                         expected);
}

absl::Status ExpectBool(const HfConfig& c, const char* key, bool want, const char* expected) {
  const JsonValue* v = HfField(c, key);
  if (v == nullptr || v->kind != JsonValue::Kind::kBool || v->boolean == want) {
    return absl::OkStatus();
  }
  return InvalidArgument(absl::StrCat(c.path, ": \"", key, "\": ", v->boolean ? "true" : "false"),
                         expected);
}

// (rows, cols) -> (cols, rows): GPT-2's Conv1D keeps (in, out).
ckpt::HostTensor Transposed(const ckpt::HostTensor& t) {
  const int64_t r = t.shape[0], c = t.shape[1];
  ckpt::HostTensor out{.shape = {c, r}, .values = std::vector<float>(t.values.size())};
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < c; ++j) out.values[j * r + i] = t.values[i * c + j];
  }
  return out;
}

}  // namespace

absl::StatusOr<GptConfig> ReadHfGpt2Config(const std::string& dir, const GptConfig& base) {
  WEFT_ASSIGN_OR_RETURN(const HfConfig hc, ReadHfConfig(dir));
  if (hc.architecture != "GPT2LMHeadModel") {
    return InvalidArgument(
        absl::StrCat(hc.path, " describes \"",
                     hc.architecture.empty() ? "no architecture" : hc.architecture, "\""),
        "GPT2LMHeadModel (//models/gpt:train)",
        "Llama, Mistral, Qwen3, Mixtral and Qwen3-MoE checkpoints train with "
        "//models/llama:train");
  }
  WEFT_RETURN_IF_ERROR(ExpectBool(hc, "tie_word_embeddings", true,
                                  "GPT-2's head tied to the token embedding"));
  WEFT_RETURN_IF_ERROR(ExpectString(hc, "activation_function", "gelu_new",
                                    "\"gelu_new\" (GPT-2's tanh GELU, weft's)"));
  WEFT_RETURN_IF_ERROR(
      ExpectBool(hc, "scale_attn_weights", true, "attention scaled by 1/sqrt(head size)"));
  WEFT_RETURN_IF_ERROR(ExpectBool(hc, "scale_attn_by_inverse_layer_idx", false,
                                  "no per-layer attention scaling (GPT-2's)"));
  WEFT_RETURN_IF_ERROR(ExpectBool(hc, "reorder_and_upcast_attn", false,
                                  "GPT-2's attention order (the default)"));
  WEFT_ASSIGN_OR_RETURN(double layers, HfNumber(hc, "n_layer"));
  WEFT_ASSIGN_OR_RETURN(double heads, HfNumber(hc, "n_head"));
  WEFT_ASSIGN_OR_RETURN(double width, HfNumber(hc, "n_embd"));
  WEFT_ASSIGN_OR_RETURN(double positions, HfNumber(hc, "n_positions"));
  WEFT_ASSIGN_OR_RETURN(double vocab, HfNumber(hc, "vocab_size"));
  WEFT_ASSIGN_OR_RETURN(double inner, HfNumber(hc, "n_inner", 4 * width));
  WEFT_ASSIGN_OR_RETURN(double eps, HfNumber(hc, "layer_norm_epsilon", 1e-5));
  if (eps != 1e-5) {
    return InvalidArgument(absl::StrCat(hc.path, ": \"layer_norm_epsilon\": ", eps),
                           "1e-05 (GPT-2's, which weft's LayerNorm uses)");
  }
  if (static_cast<int64_t>(inner) % static_cast<int64_t>(width) != 0) {
    return InvalidArgument(absl::StrCat(hc.path, ": \"n_inner\": ", inner, " with \"n_embd\": ",
                                        width),
                           "an MLP width that is a whole multiple of n_embd (weft's mlp_ratio)");
  }
  GptConfig m;
  m.set_n_layer(static_cast<int>(layers));
  m.set_n_head(static_cast<int>(heads));
  m.set_d_model(static_cast<int>(width));
  m.set_vocab_size(static_cast<int>(vocab));
  m.set_mlp_ratio(static_cast<int>(inner / width));
  m.set_tie_weights(true);
  m.set_max_seq_len(base.has_max_seq_len() ? base.max_seq_len() : static_cast<int>(positions));
  if (m.max_seq_len() > positions) {
    return InvalidArgument(absl::StrCat("--max_seq_len=", m.max_seq_len(), " but ", hc.path,
                                        " has \"n_positions\": ", positions),
                           "at most the checkpoint's positions: GPT-2 learns one row per position",
                           absl::StrCat("--max_seq_len=", positions, " or less"));
  }
  m.set_vocab_pad_multiple(base.vocab_pad_multiple());
  m.set_dropout(base.dropout());
  m.set_init_std(base.init_std());
  WEFT_RETURN_IF_ERROR(
      HfAgree(base.has_n_layer(), base.n_layer(), m.n_layer(), "n_layer", "n_layer", hc));
  WEFT_RETURN_IF_ERROR(
      HfAgree(base.has_n_head(), base.n_head(), m.n_head(), "n_head", "n_head", hc));
  WEFT_RETURN_IF_ERROR(
      HfAgree(base.has_d_model(), base.d_model(), m.d_model(), "d_model", "n_embd", hc));
  WEFT_RETURN_IF_ERROR(HfAgree(base.has_vocab_size(), base.vocab_size(), m.vocab_size(),
                               "vocab_size", "vocab_size", hc));
  WEFT_RETURN_IF_ERROR(HfAgree(base.has_mlp_ratio(), base.mlp_ratio(), m.mlp_ratio(),
                               "mlp_ratio", "n_inner", hc));
  WEFT_RETURN_IF_ERROR(HfAgree(base.has_tie_weights(), base.tie_weights(), true, "tie_weights",
                               "tie_word_embeddings", hc));
  if (base.moe_every() > 0) {
    return InvalidArgument(absl::StrCat("--moe_every=", base.moe_every(), " with ", hc.path),
                           "a dense GPT-2: the checkpoint has no experts");
  }
  return m;
}

absl::StatusOr<GptWeights> ReadHfGpt2Weights(const std::string& dir, const GptConfig& config) {
  WEFT_ASSIGN_OR_RETURN(auto hf, ReadHfTensors(dir));
  std::set<std::string> used;
  // Files from GPT2LMHeadModel say "transformer."; a bare GPT2Model's do not.
  const std::string root = hf.count("transformer.wte.weight") > 0 ? "transformer." : "";
  auto take = [&](const std::string& name,
                  const std::vector<int64_t>& shape) -> absl::StatusOr<ckpt::HostTensor> {
    auto it = hf.find(root + name);
    if (it == hf.end()) {
      return NotFound(absl::StrCat(dir, " has no tensor ", root, name),
                      "every tensor of GPT2LMHeadModel",
                      "a checkpoint written by transformers' save_pretrained");
    }
    if (it->second.shape != shape) {
      return InvalidArgument(absl::StrCat(root, name, " is ", absl::StrJoin(it->second.shape, "x")),
                             absl::StrCat(absl::StrJoin(shape, "x"), " for config.json's shape"),
                             "a config.json that matches the weights");
    }
    used.insert(root + name);
    return it->second;
  };
  const int64_t c = config.d_model(), f = int64_t{config.mlp_ratio()} * c;
  const int64_t v = config.vocab_size(), mult = config.vocab_pad_multiple();
  const int64_t padded = (v + mult - 1) / mult * mult;
  GptWeights out;
  WEFT_ASSIGN_OR_RETURN(ckpt::HostTensor wte, take("wte.weight", {v, c}));
  wte.values.resize(padded * c, 0.f);  // padding rows: zero, never looked up
  wte.shape[0] = padded;
  out["embed.wte"] = std::move(wte);
  const auto it = hf.find(root + "wpe.weight");
  const int64_t positions = it != hf.end() && !it->second.shape.empty() ? it->second.shape[0] : 0;
  WEFT_ASSIGN_OR_RETURN(ckpt::HostTensor wpe, take("wpe.weight", {positions, c}));
  wpe.values.resize(int64_t{config.max_seq_len()} * c);  // the first max_seq_len positions
  wpe.shape[0] = config.max_seq_len();
  out["embed.wpe"] = std::move(wpe);
  for (int l = 0; l < config.n_layer(); ++l) {
    const std::string h = absl::StrCat("h.", l, "."), b = absl::StrCat("blocks.", l, ".");
    // name in HF, name in weft, HF shape; Conv1D weights are (in, out).
    struct Entry {
      const char* hf;
      const char* weft;
      std::vector<int64_t> shape;
      bool transpose;
    };
    for (const Entry& e : std::vector<Entry>{
             {"ln_1.weight", "ln1.weight", {c}, false},
             {"ln_1.bias", "ln1.bias", {c}, false},
             {"attn.c_attn.weight", "attn.qkv.weight", {c, 3 * c}, true},
             {"attn.c_attn.bias", "attn.qkv.bias", {3 * c}, false},
             {"attn.c_proj.weight", "attn.proj.weight", {c, c}, true},
             {"attn.c_proj.bias", "attn.proj.bias", {c}, false},
             {"ln_2.weight", "ln2.weight", {c}, false},
             {"ln_2.bias", "ln2.bias", {c}, false},
             {"mlp.c_fc.weight", "mlp.fc.weight", {c, f}, true},
             {"mlp.c_fc.bias", "mlp.fc.bias", {f}, false},
             {"mlp.c_proj.weight", "mlp.proj.weight", {f, c}, true},
             {"mlp.c_proj.bias", "mlp.proj.bias", {c}, false}}) {
      WEFT_ASSIGN_OR_RETURN(ckpt::HostTensor t, take(h + e.hf, e.shape));
      out[b + e.weft] = e.transpose ? Transposed(t) : std::move(t);
    }
    used.insert(absl::StrCat(root, h, "attn.bias"));  // the causal mask buffer of old files
    used.insert(absl::StrCat(root, h, "attn.masked_bias"));
  }
  WEFT_ASSIGN_OR_RETURN(out["ln_f.weight"], take("ln_f.weight", {c}));
  WEFT_ASSIGN_OR_RETURN(out["ln_f.bias"], take("ln_f.bias", {c}));
  used.insert("lm_head.weight");  // tied: a copy of wte when stored
  std::vector<std::string> extra;
  for (const auto& [name, t] : hf) {
    if (used.count(name) == 0) extra.push_back(name);
  }
  if (!extra.empty()) {
    return InvalidArgument(absl::StrCat(dir, " has tensors GPT-2 does not use: ",
                                        absl::StrJoin(extra, ", ")),
                           "exactly GPT2LMHeadModel's tensors", "a config.json that matches the weights");
  }
  return out;
}

absl::StatusOr<HfExport> ToHfGpt2(const GptConfig& config, const GptWeights& weights,
                                  const std::string& dtype) {
  if (config.moe_every() > 0 || !config.tie_weights()) {
    return FailedPrecondition(
        absl::StrCat("a GPT with ", config.moe_every() > 0 ? "mixture-of-experts blocks" : "an untied head"),
        "a dense GPT-2 with its head tied to the embedding (what GPT2LMHeadModel holds)",
        "export it with --format=safetensors instead");
  }
  const int64_t c = config.d_model(), v = config.vocab_size();
  HfExport out;
  auto get = [&](const std::string& name) -> absl::StatusOr<const ckpt::HostTensor*> {
    const auto it = weights.find(name);
    if (it == weights.end()) {
      return NotFound(absl::StrCat("the checkpoint has no ", name), "every GPT parameter");
    }
    return &it->second;
  };
  WEFT_ASSIGN_OR_RETURN(const ckpt::HostTensor* wte, get("embed.wte"));
  ckpt::HostTensor vocab_rows{.shape = {v, c},
                              .values = std::vector<float>(wte->values.begin(),
                                                           wte->values.begin() + v * c)};
  out.tensors["transformer.wte.weight"] = std::move(vocab_rows);  // padding rows dropped
  WEFT_ASSIGN_OR_RETURN(const ckpt::HostTensor* wpe, get("embed.wpe"));
  out.tensors["transformer.wpe.weight"] = *wpe;
  for (int l = 0; l < config.n_layer(); ++l) {
    const std::string h = absl::StrCat("transformer.h.", l, "."), b = absl::StrCat("blocks.", l, ".");
    for (const auto& [from, to, transpose] :
         std::vector<std::tuple<const char*, const char*, bool>>{
             {"ln1.weight", "ln_1.weight", false}, {"ln1.bias", "ln_1.bias", false},
             {"attn.qkv.weight", "attn.c_attn.weight", true},
             {"attn.qkv.bias", "attn.c_attn.bias", false},
             {"attn.proj.weight", "attn.c_proj.weight", true},
             {"attn.proj.bias", "attn.c_proj.bias", false},
             {"ln2.weight", "ln_2.weight", false}, {"ln2.bias", "ln_2.bias", false},
             {"mlp.fc.weight", "mlp.c_fc.weight", true}, {"mlp.fc.bias", "mlp.c_fc.bias", false},
             {"mlp.proj.weight", "mlp.c_proj.weight", true},
             {"mlp.proj.bias", "mlp.c_proj.bias", false}}) {
      WEFT_ASSIGN_OR_RETURN(const ckpt::HostTensor* t, get(b + from));
      out.tensors[h + to] = transpose ? Transposed(*t) : *t;
    }
  }
  WEFT_ASSIGN_OR_RETURN(const ckpt::HostTensor* lnw, get("ln_f.weight"));
  WEFT_ASSIGN_OR_RETURN(const ckpt::HostTensor* lnb, get("ln_f.bias"));
  out.tensors["transformer.ln_f.weight"] = *lnw;
  out.tensors["transformer.ln_f.bias"] = *lnb;
  out.config_json = absl::StrCat(
      "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n",
      "  \"activation_function\": \"gelu_new\",\n  \"n_layer\": ", config.n_layer(),
      ",\n  \"n_head\": ", config.n_head(), ",\n  \"n_embd\": ", c,
      ",\n  \"n_inner\": ", int64_t{config.mlp_ratio()} * c, ",\n  \"n_positions\": ",
      config.max_seq_len(), ",\n  \"n_ctx\": ", config.max_seq_len(), ",\n  \"vocab_size\": ", v,
      ",\n  \"layer_norm_epsilon\": 1e-05,\n  \"initializer_range\": ", config.init_std(),
      ",\n  \"resid_pdrop\": ", config.dropout(), ",\n  \"embd_pdrop\": ", config.dropout(),
      ",\n  \"attn_pdrop\": ", config.dropout(),
      ",\n  \"scale_attn_weights\": true,\n  \"tie_word_embeddings\": true,\n",
      "  \"torch_dtype\": \"", HfTorchDtype(dtype), "\"\n}\n");
  return out;
}

}  // namespace weft
