#include "models/lm/generate.h"

#include <cmath>
#include <set>
#include <vector>

#include "core/nn/materialize.h"
#include "gtest/gtest.h"
#include "models/gpt/gpt.h"
#include "models/llama/llama.h"

namespace weft {
namespace {

TEST(PickTokenTest, TemperatureZeroIsTheFirstLargestLogit) {
  const std::vector<float> logits = {0.5f, 2.f, -1.f, 2.f};
  for (double u : {0.0, 0.5, 0.999}) EXPECT_EQ(PickToken(logits, {.temperature = 0.f}, u), 1);
  // top_k = 1 keeps the same token whatever the draw.
  for (double u : {0.0, 0.5, 0.999}) EXPECT_EQ(PickToken(logits, {.top_k = 1}, u), 1);
}

TEST(PickTokenTest, DrawsFollowTheSoftmaxAtTheTemperature) {
  // Probabilities 1/4 and 3/4 at temperature 1. Draws walk the tokens from
  // the most likely: u below 3/4 picks token 1, the rest token 0.
  const std::vector<float> logits = {0.f, std::log(3.f)};
  EXPECT_EQ(PickToken(logits, {}, 0.74), 1);
  EXPECT_EQ(PickToken(logits, {}, 0.76), 0);
  // At temperature 2 the weights are sqrt(3) and 1: token 1 up to
  // sqrt(3) / (1 + sqrt(3)).
  const double cut = std::sqrt(3.0) / (1.0 + std::sqrt(3.0));
  EXPECT_EQ(PickToken(logits, {.temperature = 2.f}, cut - 0.01), 1);
  EXPECT_EQ(PickToken(logits, {.temperature = 2.f}, cut + 0.01), 0);
}

TEST(PickTokenTest, TopKDrawsOnlyAmongTheKMostLikely) {
  // Token 3 is the most likely, then 0; with k = 2 the rest never appear,
  // and the two share the mass in proportion 2:1 (logits log 2 and 0).
  const std::vector<float> logits = {0.f, -5.f, -6.f, std::log(2.f), -7.f};
  for (int i = 0; i < 100; ++i) {
    const double u = (i + 0.5) / 100;
    const int32_t t = PickToken(logits, {.top_k = 2}, u);
    EXPECT_EQ(t, u < 2.0 / 3 ? 3 : 0) << u;
  }
}

class GenerateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GptConfig c;
    c.set_n_layer(2);
    c.set_n_head(2);
    c.set_d_model(16);
    c.set_vocab_size(11);
    c.set_vocab_pad_multiple(8);  // padded to 16: padding logits never drawn
    c.set_max_seq_len(8);
    model_ = *Gpt::Create(c, kSeqLen);
    ASSERT_TRUE(MaterializeParameters(*model_, {.seed = 5, .allocate_grads = false}).ok());
    ctx_ = *RunContext::Create(Device::Cpu(), DType::kF32);
  }
  std::vector<int32_t> Run(std::vector<int32_t> prompt, GenerateOptions o) {
    EXPECT_TRUE(Generate(*model_, kSeqLen, ctx_, o, &prompt).ok());
    return prompt;
  }
  static constexpr int64_t kSeqLen = 6;
  std::unique_ptr<Gpt> model_;
  RunContext ctx_;
};

TEST_F(GenerateTest, GreedyTokensAreTheModelsArgmaxAtTheLastPosition) {
  const std::vector<int32_t> out = Run({1, 2, 3}, {.max_new_tokens = 4, .temperature = 0.f});
  ASSERT_EQ(out.size(), 7u);
  // Each new token against the logits of its own prefix's last position.
  RunContext ctx = ctx_;
  ctx.training = false;
  for (size_t n = 3; n < out.size(); ++n) {
    Tensor x = *Tensor::FromVector<int32_t>(absl::MakeConstSpan(out.data(), n),
                                            {1, static_cast<int64_t>(n)});
    const std::vector<float> logits = *model_->Forward(ctx, x)->ToFloats();
    const float* last = logits.data() + (n - 1) * model_->padded_vocab();
    int32_t best = 0;
    for (int32_t v = 1; v < 11; ++v) best = last[v] > last[best] ? v : best;
    EXPECT_EQ(out[n], best) << n;
  }
}

TEST_F(GenerateTest, OnlyTheLastSeqLenTokensAreSeen) {
  // A prompt longer than the window continues exactly like its last
  // kSeqLen tokens alone.
  const std::vector<int32_t> longer = Run({9, 9, 9, 4, 0, 7, 1, 2, 3}, {.max_new_tokens = 5, .seed = 3});
  const std::vector<int32_t> window = Run({4, 0, 7, 1, 2, 3}, {.max_new_tokens = 5, .seed = 3});
  ASSERT_EQ(longer.size(), 14u);
  EXPECT_EQ(std::vector<int32_t>(longer.begin() + 9, longer.end()),
            std::vector<int32_t>(window.begin() + 6, window.end()));
}

TEST_F(GenerateTest, ASeedRepeatsASampleAndEveryTokenIsInTheVocabulary) {
  const GenerateOptions o{.max_new_tokens = 30, .temperature = 1.5f, .seed = 11};
  const std::vector<int32_t> a = Run({1}, o), b = Run({1}, o);
  EXPECT_EQ(a, b);
  GenerateOptions other = o;
  other.seed = 12;
  EXPECT_NE(Run({1}, other), a);
  for (int32_t t : a) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 11);
  }
}

TEST_F(GenerateTest, DrawsOnlyBelowTheVocabularyLimit) {
  // A tokenizer of 4 ids on a model of 11: no id it cannot decode.
  const std::vector<int32_t> out =
      Run({1}, {.max_new_tokens = 60, .temperature = 3.f, .seed = 2, .vocab = 4});
  for (int32_t t : out) EXPECT_LT(t, 4);
  std::vector<int32_t> outside = {5};
  EXPECT_EQ(Generate(*model_, kSeqLen, ctx_, {.vocab = 4}, &outside).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(GenerateTest, StopsAfterTheStopToken) {
  // Greedy from this prompt produces some token first; asking to stop at it
  // ends the run right after it.
  const int32_t first = Run({1, 2}, {.max_new_tokens = 1, .temperature = 0.f}).back();
  const std::vector<int32_t> out =
      Run({1, 2}, {.max_new_tokens = 10, .temperature = 0.f, .stop_id = first});
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, first}));
}

TEST_F(GenerateTest, TheKeyValueCacheGivesTheTokensOfRecomputingTheWindow) {
  // 12 new tokens after 3: the window (6) fills, then slides 9 times.
  for (const GenerateOptions& o : {GenerateOptions{.max_new_tokens = 12, .temperature = 0.f},
                                   GenerateOptions{.max_new_tokens = 12, .seed = 4}}) {
    GenerateOptions recompute = o;
    recompute.kv_cache = false;
    const std::vector<int32_t> cached = Run({1, 2, 3}, o);
    ASSERT_EQ(cached.size(), 15u);
    EXPECT_EQ(cached, Run({1, 2, 3}, recompute)) << o.temperature;
  }
}

TEST_F(GenerateTest, BadPromptsAreErrors) {
  std::vector<int32_t> empty;
  EXPECT_EQ(Generate(*model_, kSeqLen, ctx_, {}, &empty).code(), absl::StatusCode::kInvalidArgument);
  std::vector<int32_t> outside = {3, 11};
  const absl::Status s = Generate(*model_, kSeqLen, ctx_, {}, &outside);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prompt token 11"), std::string::npos) << s;
}

TEST_F(GenerateTest, BadOptionsAreErrors) {
  for (float t : {-1.f, std::nanf(""), INFINITY}) {
    std::vector<int32_t> tokens = {1, 2};
    const absl::Status s = Generate(*model_, kSeqLen, ctx_, {.temperature = t}, &tokens);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << t;
    EXPECT_NE(s.message().find("temperature="), std::string::npos) << s;
    EXPECT_EQ(tokens.size(), 2u) << "drew tokens at temperature " << t;
  }
  std::vector<int32_t> tokens = {1, 2};
  EXPECT_EQ(Generate(*model_, kSeqLen, ctx_, {.top_k = -3}, &tokens).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Generate(*model_, kSeqLen, ctx_, {.max_new_tokens = -5}, &tokens).code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status named = CheckGenerateOptions({.top_k = -3}, "--");
  EXPECT_NE(named.message().find("--top_k=-3"), std::string::npos) << named;
  EXPECT_TRUE(CheckGenerateOptions({.max_new_tokens = 0, .temperature = 0}).ok());
}

// A Llama (4 query heads over 2 K/V heads, rotary positions): greedy text
// is the same with the cache and without, past the window too (where the
// window slides and the whole window runs again).
TEST(GenerateLlamaTest, GreedyTextIsTheSameWithTheCacheOnOrOff) {
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
  std::unique_ptr<Llama> model = *Llama::Create(c, 8);
  ASSERT_TRUE(MaterializeParameters(*model, {.seed = 9}).ok());
  // Larger weights, so the text depends on the context.
  for (Parameter* p : model->Parameters()) {
    if (p->init().kind == InitSpec::Kind::kNormal) {
      std::vector<float> v = *p->value.ToFloats();
      for (float& x : v) x *= 40;
      ASSERT_TRUE(p->value.CopyFrom(*Tensor::FromFloats(v, p->shape())).ok());
    }
  }
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  std::vector<int32_t> cached = {3, 1, 4}, plain = cached;
  ASSERT_TRUE(Generate(*model, 8, ctx, {.max_new_tokens = 12, .temperature = 0.f}, &cached).ok());
  ASSERT_TRUE(Generate(*model, 8, ctx,
                       {.max_new_tokens = 12, .temperature = 0.f, .kv_cache = false}, &plain)
                  .ok());
  EXPECT_EQ(cached, plain);
  EXPECT_GT(std::set<int32_t>(cached.begin() + 3, cached.end()).size(), 1u) << "a constant text";
  // The cache gave back the model's own attention cores: training still works.
  ctx.training = true;
  Tensor x = *Tensor::FromVector<int32_t>(std::vector<int32_t>{1, 2, 3, 4}, {1, 4});
  ASSERT_TRUE(ZeroGrads(*model).ok());
  ASSERT_TRUE(model->ForwardLoss(ctx, x, x, 1.f).ok());
  EXPECT_TRUE(model->BackwardFromLoss(ctx).ok());
}

}  // namespace
}  // namespace weft
