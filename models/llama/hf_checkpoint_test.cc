// Hugging Face checkpoints written by transformers itself
// (testdata/make_hf_fixtures.py): weft's Llama built from config.json and
// loaded with the renamed weights gives transformers' per-token losses.
#include "models/llama/hf_checkpoint.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/json.h"
#include "core/nn/materialize.h"
#include "gtest/gtest.h"
#include "models/gpt/gpt_weights.h"
#include "models/llama/llama.h"

namespace weft {
namespace {

std::string Fixture(const std::string& name) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/weft/models/llama/testdata/" + name;
}

class HfCheckpointTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfCheckpointTest, LossesEqualTransformers) {
  const std::string dir = Fixture(GetParam());
  ASSERT_TRUE(IsHfCheckpoint(dir));
  absl::StatusOr<LlamaConfig> config = ReadHfLlamaConfig(dir, LlamaConfig());
  ASSERT_TRUE(config.ok()) << config.status();
  std::ifstream in(dir + "/expected.json");
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<JsonValue> expected = ParseJson(text.str());
  ASSERT_TRUE(expected.ok()) << expected.status();
  std::vector<int32_t> tokens;
  for (const JsonValue& t : expected->Find("tokens")->array) tokens.push_back(int32_t(t.number));
  const int64_t t = static_cast<int64_t>(tokens.size()) - 1;
  std::unique_ptr<Llama> model = *Llama::Create(*config, t);
  ASSERT_TRUE(MaterializeParameters(*model, {.seed = 1, .allocate_grads = false}).ok());
  absl::StatusOr<std::map<std::string, ckpt::HostTensor>> weights = ReadHfLlamaWeights(dir, *config);
  ASSERT_TRUE(weights.ok()) << weights.status();
  ASSERT_TRUE(ImportWeights(*weights, *model).ok());
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  ctx.training = false;
  Tensor x = *Tensor::FromVector<int32_t>(std::vector<int32_t>(tokens.begin(), tokens.end() - 1), {1, t});
  Tensor y = *Tensor::FromVector<int32_t>(std::vector<int32_t>(tokens.begin() + 1, tokens.end()), {1, t});
  std::vector<float> losses = *model->ForwardLoss(ctx, x, y, 1.f)->ToFloats();
  const std::vector<JsonValue>& want = expected->Find("losses")->array;
  ASSERT_EQ(losses.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(losses[i], want[i].number, 2e-5 * std::fabs(want[i].number)) << "token " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Transformers, HfCheckpointTest,
                         ::testing::Values("hf_llama_tiny", "hf_qwen3_tiny", "hf_mixtral_tiny",
                                           "hf_mixtral_fused_tiny", "hf_qwen3_moe_tiny"));

// Export and read back: the same config and weights, and for files
// transformers wrote, the very tensor names and values it wrote (sharded
// into several files here, with their index).
TEST_P(HfCheckpointTest, ExportReadsBackAndMatchesTransformersFiles) {
  const std::string dir = Fixture(GetParam());
  const LlamaConfig config = *ReadHfLlamaConfig(dir, LlamaConfig());
  const std::map<std::string, ckpt::HostTensor> weights = *ReadHfLlamaWeights(dir, config);
  absl::StatusOr<HfExport> hf = ToHfLlama(config, weights, "F32");
  ASSERT_TRUE(hf.ok()) << hf.status();
  const std::string out = std::string(std::getenv("TEST_TMPDIR")) + "/" + GetParam();
  ASSERT_TRUE(WriteHfDirectory(out, hf->config_json, hf->tensors, {.shard_bytes = 20000}).ok());
  absl::StatusOr<LlamaConfig> again = ReadHfLlamaConfig(out, LlamaConfig());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->DebugString(), config.DebugString());
  absl::StatusOr<std::map<std::string, ckpt::HostTensor>> back = ReadHfLlamaWeights(out, *again);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), weights.size());
  for (const auto& [name, t] : weights) {
    EXPECT_EQ(back->at(name).shape, t.shape) << name;
    EXPECT_EQ(back->at(name).values, t.values) << name;
  }
  if (GetParam() == "hf_mixtral_fused_tiny") return;  // its file is not save_pretrained's
  absl::StatusOr<std::map<std::string, ckpt::HostTensor>> theirs = ReadHfTensors(dir);
  ASSERT_TRUE(theirs.ok());
  for (const auto& [name, t] : *theirs) {
    if (name == "lm_head.weight" && config.tie_weights()) continue;  // tied: a copy
    ASSERT_EQ(hf->tensors.count(name), 1u) << name << " not exported";
    EXPECT_EQ(hf->tensors.at(name).values, t.values) << name;
  }
  EXPECT_EQ(hf->tensors.size(), theirs->size() - (config.tie_weights() && theirs->count("lm_head.weight")));
}

TEST(HfCheckpointConfigTest, AFlagThatContradictsConfigJsonIsAnError) {
  LlamaConfig base;
  base.set_n_layer(3);
  const absl::Status s = ReadHfLlamaConfig(Fixture("hf_llama_tiny"), base).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--n_layer=3 but"), std::string::npos) << s;
  EXPECT_NE(s.message().find("\"num_hidden_layers\": 2"), std::string::npos) << s;
}

TEST(HfCheckpointConfigTest, ReadsTheShapeAndTheRopeScaling) {
  LlamaConfig c = *ReadHfLlamaConfig(Fixture("hf_llama_tiny"), LlamaConfig());
  EXPECT_EQ(c.n_kv_head(), 2);
  EXPECT_EQ(c.ffn_hidden(), 48);
  EXPECT_FALSE(c.tie_weights());
  EXPECT_EQ(c.rope_scaling().rope_type(), "llama3");
  EXPECT_FLOAT_EQ(c.rope_scaling().factor(), 8);
  EXPECT_EQ(c.rope_scaling().original_max_position_embeddings(), 8);
  LlamaConfig q = *ReadHfLlamaConfig(Fixture("hf_qwen3_tiny"), LlamaConfig());
  EXPECT_TRUE(q.qk_norm());
  EXPECT_EQ(q.head_dim(), 16);
  EXPECT_TRUE(q.tie_weights());
}

TEST(HfCheckpointConfigTest, ReadsTheMixturesOfExperts) {
  LlamaConfig m = *ReadHfLlamaConfig(Fixture("hf_mixtral_tiny"), LlamaConfig());
  EXPECT_EQ(m.num_experts(), 4);
  EXPECT_EQ(m.top_k(), 2);
  EXPECT_EQ(m.moe_ffn_hidden(), 24);
  EXPECT_TRUE(m.norm_topk_prob());
  EXPECT_FALSE(m.qk_norm());
  LlamaConfig q = *ReadHfLlamaConfig(Fixture("hf_qwen3_moe_tiny"), LlamaConfig());
  EXPECT_EQ(q.num_experts(), 8);
  EXPECT_EQ(q.top_k(), 4);
  EXPECT_EQ(q.moe_ffn_hidden(), 16);
  EXPECT_FALSE(q.norm_topk_prob());
  EXPECT_TRUE(q.qk_norm());
  EXPECT_FLOAT_EQ(q.moe_aux_loss_coef(), 0.001f);  // router_aux_loss_coef
  LlamaConfig base;
  base.set_num_experts(6);
  const absl::Status s = ReadHfLlamaConfig(Fixture("hf_mixtral_tiny"), base).status();
  EXPECT_NE(s.message().find("--num_experts=6 but"), std::string::npos) << s;
  EXPECT_NE(s.message().find("\"num_local_experts\": 4"), std::string::npos) << s;
}

}  // namespace
}  // namespace weft
