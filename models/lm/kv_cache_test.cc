#include "models/lm/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/nn/materialize.h"
#include "core/nn/recompute.h"
#include "gtest/gtest.h"
#include "models/gpt/gpt.h"
#include "models/llama/llama.h"

namespace weft {
namespace {

constexpr int64_t kMaxSeqLen = 8;

GptConfig SmallConfig() {
  GptConfig c;
  c.set_n_layer(2);
  c.set_n_head(2);
  c.set_d_model(16);
  c.set_vocab_size(11);
  c.set_vocab_pad_multiple(8);
  c.set_max_seq_len(kMaxSeqLen);
  return c;
}

// The largest |got - want| over max(1, |want|).
double RelErr(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double e = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    e = std::max(e, std::fabs(double(got[i]) - want[i]) / std::max(1.0, std::fabs(double(want[i]))));
  }
  return e;
}

struct Variant {
  const char* name;
  void (*edit)(GptConfig&);
};

class KvCacheTest : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    GptConfig c = SmallConfig();
    GetParam().edit(c);
    model_ = *Gpt::Create(c, kMaxSeqLen);
    ASSERT_TRUE(MaterializeParameters(*model_, {.seed = 7, .allocate_grads = false}).ok());
    ctx_ = *RunContext::Create(Device::Cpu(), DType::kF32);
    ctx_.training = false;
  }
  // The full forward's logits at the last position of tokens[0, n).
  std::vector<float> FullLast(const std::vector<int32_t>& tokens, int64_t n) {
    Tensor x = *Tensor::FromVector<int32_t>(absl::MakeConstSpan(tokens.data(), n), {1, n});
    absl::StatusOr<Tensor> logits = model_->Forward(ctx_, x);
    EXPECT_TRUE(logits.ok()) << logits.status();
    return *logits->Slice(0, n - 1, n).ToFloats();
  }
  std::unique_ptr<Gpt> model_;
  RunContext ctx_;
};

TEST_P(KvCacheTest, LogitsEqualTheFullForwardAtEveryPrefix) {
  const std::vector<int32_t> tokens = {3, 1, 4, 1, 5, 9, 2, 6};
  absl::StatusOr<std::unique_ptr<KvCache>> made = KvCache::Create(*model_, ctx_, kMaxSeqLen);
  ASSERT_TRUE(made.ok()) << made.status();
  KvCache* cache = made->get();
  // A 3-token prompt in one call, then one token at a time to the end.
  absl::StatusOr<Tensor> logits = cache->Append(ctx_, absl::MakeConstSpan(tokens.data(), 3));
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->shape(), (Shape{1, model_->padded_vocab()}));
  EXPECT_LT(RelErr(*logits->ToFloats(), FullLast(tokens, 3)), 1e-5);
  for (int64_t n = 4; n <= kMaxSeqLen; ++n) {
    logits = cache->Append(ctx_, absl::MakeConstSpan(tokens.data() + n - 1, 1));
    ASSERT_TRUE(logits.ok()) << logits.status();
    EXPECT_EQ(cache->size(), n);
    EXPECT_LT(RelErr(*logits->ToFloats(), FullLast(tokens, n)), 1e-5) << n;
  }
  // Cleared, it starts again at position 0: the last 4 tokens as a new window.
  cache->Clear();
  logits = cache->Append(ctx_, absl::MakeConstSpan(tokens.data() + 4, 4));
  ASSERT_TRUE(logits.ok()) << logits.status();
  const std::vector<int32_t> tail(tokens.begin() + 4, tokens.end());
  EXPECT_LT(RelErr(*logits->ToFloats(), FullLast(tail, 4)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Models, KvCacheTest,
    ::testing::Values(Variant{"dense", [](GptConfig&) {}},
                      Variant{"untied_with_dropout",
                              [](GptConfig& c) {
                                c.set_tie_weights(false);
                                c.set_dropout(0.5f);  // evaluation: no dropout
                              }},
                      Variant{"moe_dropless",
                              [](GptConfig& c) {
                                c.set_moe_every(1);
                                c.set_num_experts(4);
                                c.set_top_k(2);
                              }},
                      // Routing groups split a training micro-batch; one
                      // sequence being decoded is one group (it was an
                      // error: "1 samples in 2 routing groups").
                      Variant{"moe_routing_groups",
                              [](GptConfig& c) {
                                c.set_moe_every(1);
                                c.set_num_experts(4);
                                c.set_top_k(2);
                                c.set_moe_routing_groups(2);
                              }}),
    [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

TEST(KvCacheLimitsTest, RefusesMoreTokensThanItHolds) {
  std::unique_ptr<Gpt> model = *Gpt::Create(SmallConfig(), kMaxSeqLen);
  ASSERT_TRUE(MaterializeParameters(*model, {.seed = 1, .allocate_grads = false}).ok());
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  EXPECT_EQ(KvCache::Create(*model, ctx, kMaxSeqLen + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::unique_ptr<KvCache> made = *KvCache::Create(*model, ctx, 4);
  KvCache& cache = *made;
  const std::vector<int32_t> three = {1, 2, 3};
  ASSERT_TRUE(cache.Append(ctx, three).ok());
  const absl::Status over = cache.Append(ctx, {4, 5}).status();
  EXPECT_EQ(over.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(over.message().find("2 new tokens after 3 cached"), std::string::npos) << over;
  EXPECT_EQ(cache.size(), 3);  // a refused call keeps what was there
  EXPECT_TRUE(cache.Append(ctx, {4}).ok());
  cache.Clear();
  EXPECT_TRUE(cache.Append(ctx, {4, 5, 6, 7}).ok());
  EXPECT_EQ(cache.Append(ctx, std::vector<int32_t>{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Stands in for an attention a strategy swapped in (one without a core).
class OtherAttention : public Module {
 public:
  OtherAttention() : Module("OtherAttention") {}
  absl::StatusOr<Tensor> Forward(RunContext&, const Tensor& x) override { return x; }
  absl::StatusOr<Tensor> Backward(RunContext&, const Tensor& dy) override { return dy; }
};

// Recompute wrappers (a whole block, or a block's attention) change what a
// training forward keeps, not what it computes: the cache sees through them
// (--sample_every with --recompute stopped the run at its first sample).
TEST(KvCacheLimitsTest, SeesThroughRecomputeWrappers) {
  std::unique_ptr<Gpt> model = *Gpt::Create(SmallConfig(), kMaxSeqLen);
  ASSERT_TRUE(MaterializeParameters(*model, {.seed = 7, .allocate_grads = false}).ok());
  ASSERT_TRUE(EnableRecompute(*model->blocks(), "0").ok());
  ASSERT_TRUE(EnableRecompute(*model->blocks()->children()[1], "attn").ok());
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  ctx.training = false;
  const std::vector<int32_t> tokens = {3, 1, 4, 1, 5};
  absl::StatusOr<std::unique_ptr<KvCache>> cache = KvCache::Create(*model, ctx, kMaxSeqLen);
  ASSERT_TRUE(cache.ok()) << cache.status();
  absl::StatusOr<Tensor> logits = (*cache)->Append(ctx, tokens);
  ASSERT_TRUE(logits.ok()) << logits.status();
  Tensor x = *Tensor::FromVector<int32_t>(tokens, {1, 5});
  absl::StatusOr<Tensor> full = model->Forward(ctx, x);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_LT(RelErr(*logits->ToFloats(), *full->Slice(0, 4, 5).ToFloats()), 1e-5);
}

TEST(KvCacheLimitsTest, RefusesAModelWhoseAttentionWasSwapped) {
  std::unique_ptr<Gpt> model = *Gpt::Create(SmallConfig(), kMaxSeqLen);
  Module* block = model->blocks()->children()[1];
  ASSERT_TRUE(block->ReplaceChild("attn", std::make_unique<OtherAttention>()).ok());
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  const absl::Status s = KvCache::Create(*model, ctx, 4).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("blocks.1"), std::string::npos) << s;
}

// Llama: grouped-query attention with rotary angles at the cached
// positions; and the model's own cores return when the cache goes.
TEST(KvCacheLlamaTest, LogitsEqualTheFullForwardAtEveryPrefix) {
  LlamaConfig c;
  c.set_n_layer(2);
  c.set_n_head(4);
  c.set_n_kv_head(2);
  c.set_d_model(16);
  c.set_ffn_hidden(24);
  c.set_vocab_size(11);
  c.set_vocab_pad_multiple(8);
  c.set_max_seq_len(kMaxSeqLen);
  c.set_rope_theta(10000);
  std::unique_ptr<Llama> model = *Llama::Create(c, kMaxSeqLen);
  ASSERT_TRUE(MaterializeParameters(*model, {.seed = 3, .allocate_grads = false}).ok());
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  ctx.training = false;
  const std::vector<int32_t> tokens = {3, 1, 4, 1, 5, 9, 2, 6};
  auto full_last = [&](int64_t n) {
    Tensor x = *Tensor::FromVector<int32_t>(absl::MakeConstSpan(tokens.data(), n), {1, n});
    return *model->Forward(ctx, x)->Slice(0, n - 1, n).ToFloats();
  };
  {
    std::unique_ptr<KvCache> cache = *KvCache::Create(*model, ctx, kMaxSeqLen);
    absl::StatusOr<Tensor> logits = cache->Append(ctx, absl::MakeConstSpan(tokens.data(), 2));
    ASSERT_TRUE(logits.ok()) << logits.status();
    EXPECT_LT(RelErr(*logits->ToFloats(), full_last(2)), 1e-5);
    for (int64_t n = 3; n <= kMaxSeqLen; ++n) {
      logits = cache->Append(ctx, absl::MakeConstSpan(tokens.data() + n - 1, 1));
      ASSERT_TRUE(logits.ok()) << logits.status();
      EXPECT_LT(RelErr(*logits->ToFloats(), full_last(n)), 1e-5) << n;
    }
  }
  std::vector<std::string> types;
  for (Module* m : model->Modules()) types.push_back(m->type_name());
  EXPECT_EQ(std::count(types.begin(), types.end(), "CausalAttentionCore"), 2);
  EXPECT_EQ(std::count(types.begin(), types.end(), "CachedAttention"), 0);
}

}  // namespace
}  // namespace weft
