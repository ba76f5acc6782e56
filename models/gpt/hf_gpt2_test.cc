// A Hugging Face GPT2LMHeadModel that transformers itself wrote
// (testdata/make_hf_gpt2_fixture.py): weft's GPT built from config.json and
// loaded with the renamed, transposed weights gives transformers' per-token
// losses; contradicting flags and other architectures are refused.
#include "models/gpt/hf_gpt2.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/json.h"
#include "core/nn/materialize.h"
#include "gtest/gtest.h"
#include "models/gpt/gpt.h"

namespace weft {
namespace {

std::string Fixture(const std::string& path) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/weft/" + path;
}
const char* kGpt2 = "models/gpt/testdata/hf_gpt2_tiny";

TEST(HfGpt2Test, LossesEqualTransformers) {
  const std::string dir = Fixture(kGpt2);
  ASSERT_TRUE(IsHfCheckpoint(dir));
  absl::StatusOr<GptConfig> config = ReadHfGpt2Config(dir, GptConfig());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->vocab_size(), 65);
  EXPECT_EQ(config->max_seq_len(), 32);
  EXPECT_EQ(config->mlp_ratio(), 4);
  std::ifstream in(dir + "/expected.json");
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<JsonValue> expected = ParseJson(text.str());
  ASSERT_TRUE(expected.ok()) << expected.status();
  std::vector<int32_t> tokens;
  for (const JsonValue& t : expected->Find("tokens")->array) tokens.push_back(int32_t(t.number));
  const int64_t t = static_cast<int64_t>(tokens.size()) - 1;
  std::unique_ptr<Gpt> model = *Gpt::Create(*config, t);
  ASSERT_TRUE(MaterializeParameters(*model, {.seed = 1, .allocate_grads = false}).ok());
  absl::StatusOr<GptWeights> weights = ReadHfGpt2Weights(dir, *config);
  ASSERT_TRUE(weights.ok()) << weights.status();
  // The vocabulary of 65 padded to 128 rows, the head tied.
  EXPECT_EQ(weights->at("embed.wte").shape, (std::vector<int64_t>{128, 32}));
  EXPECT_EQ(weights->count("lm_head.weight"), 0u);
  ASSERT_TRUE(ImportWeights(*weights, *model).ok());
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  ctx.training = false;
  Tensor x = *Tensor::FromVector<int32_t>(std::vector<int32_t>(tokens.begin(), tokens.end() - 1),
                                          {1, t});
  Tensor y = *Tensor::FromVector<int32_t>(std::vector<int32_t>(tokens.begin() + 1, tokens.end()),
                                          {1, t});
  std::vector<float> losses = *model->ForwardLoss(ctx, x, y, 1.f)->ToFloats();
  const std::vector<JsonValue>& want = expected->Find("losses")->array;
  ASSERT_EQ(losses.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(losses[i], want[i].number, 2e-5 * std::fabs(want[i].number)) << "token " << i;
  }
}

TEST(HfGpt2Test, FlagsThatContradictConfigJsonAreErrors) {
  GptConfig base;
  base.set_n_head(8);
  absl::Status s = ReadHfGpt2Config(Fixture(kGpt2), base).status();
  EXPECT_NE(s.message().find("--n_head=8 but"), std::string::npos) << s;
  EXPECT_NE(s.message().find("\"n_head\": 4"), std::string::npos) << s;
  base = GptConfig();
  base.set_max_seq_len(64);
  s = ReadHfGpt2Config(Fixture(kGpt2), base).status();
  EXPECT_NE(s.message().find("\"n_positions\": 32"), std::string::npos) << s;
  base.set_max_seq_len(16);  // fewer positions: the table's first rows
  absl::StatusOr<GptConfig> c = ReadHfGpt2Config(Fixture(kGpt2), base);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(ReadHfGpt2Weights(Fixture(kGpt2), *c)->at("embed.wpe").shape,
            (std::vector<int64_t>{16, 32}));
}

TEST(HfGpt2Test, ExportReadsBackAndMatchesTransformersFile) {
  const std::string dir = Fixture(kGpt2);
  const GptConfig config = *ReadHfGpt2Config(dir, GptConfig());
  const GptWeights weights = *ReadHfGpt2Weights(dir, config);
  absl::StatusOr<HfExport> hf = ToHfGpt2(config, weights, "F32");
  ASSERT_TRUE(hf.ok()) << hf.status();
  const std::string out = std::string(std::getenv("TEST_TMPDIR")) + "/gpt2_export";
  ASSERT_TRUE(WriteHfDirectory(out, hf->config_json, hf->tensors).ok());
  absl::StatusOr<GptConfig> again = ReadHfGpt2Config(out, GptConfig());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->DebugString(), config.DebugString());
  const GptWeights back = *ReadHfGpt2Weights(out, *again);
  for (const auto& [name, t] : weights) EXPECT_EQ(back.at(name).values, t.values) << name;
  // The names and values transformers wrote (less the old causal-mask buffers).
  const auto theirs = *ReadHfTensors(dir);
  for (const auto& [name, t] : theirs) {
    if (name == "lm_head.weight") continue;
    ASSERT_EQ(hf->tensors.count(name), 1u) << name;
    EXPECT_EQ(hf->tensors.at(name).values, t.values) << name;
  }
}

TEST(HfGpt2Test, OtherArchitecturesAreNamed) {
  const absl::Status s =
      ReadHfGpt2Config(Fixture("models/llama/testdata/hf_llama_tiny"), GptConfig()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("\"LlamaForCausalLM\""), std::string::npos) << s;
  EXPECT_NE(s.message().find("//models/llama:train"), std::string::npos) << s;
}

}  // namespace
}  // namespace weft
