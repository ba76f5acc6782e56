#include "models/llama/llama.h"

#include <algorithm>
#include <vector>

#include "core/nn/materialize.h"
#include "core/optim/optimizer.h"
#include "core/testing/grad_check.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

using ::weft::testing::NumericalGradient;
using ::weft::testing::RelativeError;
using ::weft::testing::Values;

LlamaConfig Tiny() {
  LlamaConfig c;
  c.set_n_layer(2);
  c.set_n_head(4);
  c.set_n_kv_head(2);
  c.set_d_model(16);
  c.set_ffn_hidden(24);
  c.set_vocab_size(11);
  c.set_vocab_pad_multiple(8);
  c.set_max_seq_len(8);
  c.set_rope_theta(10000);
  return c;
}

Tensor Tokens(std::vector<int32_t> v, int64_t b, int64_t t) {
  return *Tensor::FromVector<int32_t>(v, {b, t});
}

TEST(LlamaTest, ConfigErrorsNameTheFieldAndTheRule) {
  LlamaConfig c = Tiny();
  c.set_n_kv_head(3);
  absl::Status s = Llama::Create(c, 8).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("n_head=4 is not divisible by n_kv_head=3"), std::string::npos) << s;
  s = Llama::Create(Tiny(), 9).status();
  EXPECT_NE(s.message().find("rotary table has max_seq_len positions"), std::string::npos) << s;
  c = Tiny();
  c.mutable_rope_scaling()->set_factor(8);
  c.mutable_rope_scaling()->set_low_freq_factor(1);
  c.mutable_rope_scaling()->set_high_freq_factor(4);
  s = Llama::Create(c, 8).status();
  EXPECT_NE(s.message().find("rope_scaling without original_max_position_embeddings"),
            std::string::npos)
      << s;
  c.mutable_rope_scaling()->set_original_max_position_embeddings(8192);
  EXPECT_TRUE(Llama::Create(c, 8).ok());
  c.mutable_rope_scaling()->set_rope_type("yarn");
  EXPECT_NE(Llama::Create(c, 8).status().message().find("rope_type"), std::string::npos);
  c = Tiny();
  c.set_head_dim(3);
  EXPECT_FALSE(Llama::Create(c, 8).ok());
}

TEST(LlamaTest, MetaFfnRuleGivesTheReleasedSizes) {
  LlamaConfig c;
  c.set_d_model(4096);
  c.set_ffn_dim_multiplier(1.3f);
  c.set_multiple_of(1024);
  EXPECT_EQ(LlamaFfnHidden(c), 14336);  // Llama 3 8B
  c.set_d_model(4096);
  c.set_ffn_dim_multiplier(0);
  c.set_multiple_of(256);
  EXPECT_EQ(LlamaFfnHidden(c), 11008);  // Llama 2 7B
  c.set_ffn_hidden(8192);
  EXPECT_EQ(LlamaFfnHidden(c), 8192);
}

TEST(LlamaTest, NamesAndSharesOfTheParameters) {
  auto m = *Llama::Create(Tiny(), 8);
  std::vector<std::string> names;
  for (Parameter* p : m->Parameters()) names.push_back(p->name());
  for (const char* want : {"embed.wte", "blocks.0.ln1.weight", "blocks.0.attn.q.weight",
                           "blocks.0.attn.k.weight", "blocks.0.attn.v.weight",
                           "blocks.0.attn.proj.weight", "blocks.1.mlp.gate_up.weight",
                           "blocks.1.mlp.down.weight", "ln_f.weight", "lm_head.weight"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  for (const std::string& n : names) {
    EXPECT_EQ(n.find("bias"), std::string::npos) << n;
    EXPECT_EQ(n.find("wpe"), std::string::npos) << n;
  }
  EXPECT_EQ(m->FindParameter("blocks.0.attn.k.weight")->shape(), (Shape{2 * 4, 16}));
  EXPECT_EQ(m->FindParameter("blocks.0.mlp.gate_up.weight")->shape(), (Shape{48, 16}));
  EXPECT_FLOAT_EQ(m->FindParameter("blocks.0.attn.proj.weight")->init().std, 0.01f);
}

// The released 1B shape: 1.24 B parameters (tied), as Hugging Face counts them.
TEST(LlamaTest, Llama32OneBillionShape) {
  LlamaConfig c;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    n_layer: 16 n_head: 32 n_kv_head: 8 d_model: 2048 ffn_hidden: 8192
    vocab_size: 128256 vocab_pad_multiple: 1 max_seq_len: 64 tie_weights: true
  )pb", &c));
  auto m = *Llama::Create(c, 64);
  int64_t n = 0;
  for (Parameter* p : m->Parameters()) n += p->numel();
  EXPECT_EQ(n, 1235814400);
}

int64_t Parameters(const LlamaConfig& c) {
  auto m = Llama::Create(c, 64);
  EXPECT_TRUE(m.ok()) << m.status();
  int64_t n = 0;
  for (Parameter* p : (*m)->Parameters()) n += p->numel();
  return n;
}

// The released MoE shapes, as Hugging Face counts them: Mixtral 8x7B and
// Qwen3-30B-A3B (QK-norm, head_dim 128 beside a 2048 residual, 128
// experts of 768, top-8).
TEST(LlamaTest, MixtureOfExpertsShapes) {
  LlamaConfig mixtral;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    n_layer: 32 n_head: 32 n_kv_head: 8 d_model: 4096 ffn_hidden: 14336
    vocab_size: 32000 vocab_pad_multiple: 1 max_seq_len: 64
    num_experts: 8 top_k: 2
  )pb", &mixtral));
  EXPECT_EQ(Parameters(mixtral), 46702792704);
  LlamaConfig qwen3;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    n_layer: 48 n_head: 32 n_kv_head: 4 head_dim: 128 d_model: 2048 qk_norm: true
    vocab_size: 151936 vocab_pad_multiple: 1 max_seq_len: 64
    num_experts: 128 top_k: 8 moe_ffn_hidden: 768
  )pb", &qwen3));
  EXPECT_EQ(Parameters(qwen3), 30532122624);
}

TEST(LlamaTest, MixtureOfExpertsNamesAndErrors) {
  LlamaConfig c = Tiny();
  c.set_num_experts(4);
  c.set_moe_ffn_hidden(12);
  c.set_shared_expert_hidden(8);
  auto m = *Llama::Create(c, 8);
  EXPECT_EQ(m->FindParameter("blocks.1.mlp.experts.gate_up_weight")->shape(),
            (Shape{4, 2, 12, 16}));
  EXPECT_EQ(m->FindParameter("blocks.1.mlp.experts.down_weight")->shape(), (Shape{4, 16, 12}));
  EXPECT_EQ(m->FindParameter("blocks.0.mlp.router.weight")->shape(), (Shape{4, 16}));
  EXPECT_EQ(m->FindParameter("blocks.0.mlp.shared.gate_up.weight")->shape(), (Shape{16, 16}));
  EXPECT_EQ(m->FindParameter("blocks.0.mlp.gate_up.weight"), nullptr);
  EXPECT_NE(m->Summary().find("MoE 4 experts of 12 top-2 softmax renormalised shared 8"),
            std::string::npos)
      << m->Summary();
  const auto error = [](LlamaConfig bad) {
    auto r = Llama::Create(bad, 8);
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  LlamaConfig bad = c;
  bad.set_top_k(5);
  EXPECT_NE(error(bad).find("top_k=5 with num_experts=4"), std::string::npos) << error(bad);
  bad = c;
  bad.set_router_score("relu");
  EXPECT_NE(error(bad).find("router_score=\"relu\""), std::string::npos) << error(bad);
  bad = c;
  bad.set_top_k(1);  // norm_topk_prob defaults to true
  EXPECT_NE(error(bad).find("renormalised gates with top_k=1"), std::string::npos) << error(bad);
  bad = c;
  bad.set_router_score("sigmoid");
  bad.set_moe_z_loss_coef(0.01f);
  EXPECT_NE(error(bad).find("sigmoid router scores"), std::string::npos) << error(bad);
}

TEST(LlamaTest, GradientsMatchFiniteDifferences) {
  LlamaConfig c = Tiny();
  c.set_tie_weights(true);
  auto m = *Llama::Create(c, 4);
  ASSERT_TRUE(MaterializeParameters(*m, {.seed = 3}).ok());
  for (Parameter* p : m->Parameters()) {
    if (p->init().kind == InitSpec::Kind::kNormal) {
      ASSERT_TRUE(p->value.CopyFrom(testing::RandomTensor(p->shape(), p->numel(), 0.3f)).ok());
    }
  }
  Tensor x = Tokens({1, 4, 9, 2, 3, 3, 0, 10}, 2, 4), y = Tokens({4, 9, 2, 5, 3, 0, 10, 1}, 2, 4);
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  const float scale = 1.0f / 8;
  ASSERT_TRUE(ZeroGrads(*m).ok());
  ASSERT_TRUE(m->ForwardLoss(ctx, x, y, scale).ok());
  ASSERT_TRUE(m->BackwardFromLoss(ctx).ok());
  auto loss = [&] {
    RunContext eval = *RunContext::Create(Device::Cpu(), DType::kF32);
    eval.training = false;
    Tensor l = *m->ForwardLoss(eval, x, y, scale);
    m->ReleaseActivationsRecursive(eval);
    double s = 0;
    for (float v : Values(l)) s += v;
    return s * scale;
  };
  for (const char* name : {"embed.wte", "blocks.0.attn.q.weight", "blocks.0.attn.k.weight",
                           "blocks.1.attn.v.weight", "blocks.1.mlp.gate_up.weight",
                           "blocks.1.ln2.weight", "ln_f.weight"}) {
    Parameter* p = m->FindParameter(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_LT(RelativeError(Values(p->grad), NumericalGradient(p->value, loss, 1e-3f)), 2e-2)
        << name;
  }
}

// A causal model: the loss at position t does not depend on later tokens.
TEST(LlamaTest, IsCausal) {
  auto m = *Llama::Create(Tiny(), 6);
  ASSERT_TRUE(MaterializeParameters(*m, {.seed = 5}).ok());
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  ctx.training = false;
  Tensor y = Tokens({1, 2, 3, 4, 5, 6}, 1, 6);
  std::vector<float> a = Values(*m->ForwardLoss(ctx, Tokens({3, 1, 4, 1, 5, 9}, 1, 6), y, 1));
  std::vector<float> b = Values(*m->ForwardLoss(ctx, Tokens({3, 1, 4, 1, 7, 2}, 1, 6), y, 1));
  for (int t = 0; t < 4; ++t) EXPECT_EQ(a[t], b[t]) << t;
  EXPECT_NE(a[4], b[4]);
}

}  // namespace
}  // namespace weft
