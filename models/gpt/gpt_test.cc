#include "models/gpt/gpt.h"

#include <cmath>
#include <vector>

#include "core/nn/materialize.h"
#include "core/optim/optimizer.h"
#include "core/testing/grad_check.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

using ::weft::testing::NumericalGradient;
using ::weft::testing::RelativeError;
using ::weft::testing::Values;

GptConfig Tiny() {
  GptConfig c;
  c.set_n_layer(2);
  c.set_n_head(2);
  c.set_d_model(16);
  c.set_vocab_size(11);
  c.set_vocab_pad_multiple(8);
  c.set_max_seq_len(8);
  return c;
}

Tensor Tokens(std::vector<int32_t> v, int64_t b, int64_t t) {
  return *Tensor::FromVector<int32_t>(v, {b, t});
}

TEST(GptTest, ConfigErrorsAreClear) {
  GptConfig c = Tiny();
  c.set_n_head(3);
  absl::Status s = Gpt::Create(c, 8).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("n_head=3 does not divide d_model=16"), std::string::npos);
  EXPECT_NE(Gpt::Create(Tiny(), 9).status().message().find("max_seq_len"), std::string::npos);
  c = Tiny();
  c.set_vocab_size(0);
  EXPECT_FALSE(Gpt::Create(c, 8).ok());
  c = Tiny();
  c.set_n_layer(0);
  EXPECT_FALSE(Gpt::Create(c, 8).ok());
  // An empty MLP crashed a kernel with SIGFPE (train and //tools:estimate).
  c = Tiny();
  c.set_mlp_ratio(0);
  s = Gpt::Create(c, 8).status();
  EXPECT_NE(s.message().find("--mlp_ratio=0"), std::string::npos) << s;
}

TEST(GptTest, VocabIsPaddedAndWeightsTied) {
  auto gpt = *Gpt::Create(Tiny(), 8);
  EXPECT_EQ(gpt->padded_vocab(), 16);
  std::vector<std::string> names;
  for (Parameter* p : gpt->Parameters()) names.push_back(p->name());
  EXPECT_EQ(names.front(), "embed.wte");
  EXPECT_EQ(std::count(names.begin(), names.end(), "lm_head.weight"), 0);  // tied
  EXPECT_NE(std::find(names.begin(), names.end(), "blocks.1.mlp.proj.weight"), names.end());
  GptConfig untied = Tiny();
  untied.set_tie_weights(false);
  auto g2 = *Gpt::Create(untied, 8);
  EXPECT_NE(g2->FindParameter("lm_head.weight"), nullptr);
}

TEST(GptTest, ResidualProjectionsUseScaledInit) {
  auto gpt = *Gpt::Create(Tiny(), 8);
  Parameter* proj = gpt->FindParameter("blocks.0.attn.proj.weight");
  Parameter* qkv = gpt->FindParameter("blocks.0.attn.qkv.weight");
  EXPECT_FLOAT_EQ(qkv->init().std, 0.02f);
  EXPECT_FLOAT_EQ(proj->init().std, 0.02f / 2.0f);  // 1/sqrt(2 * 2 layers)
}

// End-to-end gradient check through embedding, blocks, ln_f, tied head and
// the fused loss.
TEST(GptTest, GradientsMatchFiniteDifferences) {
  auto gpt = *Gpt::Create(Tiny(), 4);
  ASSERT_TRUE(MaterializeParameters(*gpt, {.seed = 3}).ok());
  // Larger weights than GPT init so every path carries signal.
  for (Parameter* p : gpt->Parameters()) {
    if (p->init().kind == InitSpec::Kind::kNormal) {
      ASSERT_TRUE(p->value.CopyFrom(testing::RandomTensor(p->shape(), p->numel(), 0.3f)).ok());
    }
  }
  Tensor x = Tokens({1, 4, 9, 2, 3, 3, 0, 10}, 2, 4), y = Tokens({4, 9, 2, 5, 3, 0, 10, 1}, 2, 4);
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  const float scale = 1.0f / 8;
  ASSERT_TRUE(ZeroGrads(*gpt).ok());
  ASSERT_TRUE(gpt->ForwardLoss(ctx, x, y, scale).ok());
  ASSERT_TRUE(gpt->BackwardFromLoss(ctx).ok());
  auto loss = [&] {
    RunContext eval = *RunContext::Create(Device::Cpu(), DType::kF32);
    eval.training = false;
    Tensor l = *gpt->ForwardLoss(eval, x, y, scale);
    gpt->ReleaseActivationsRecursive(eval);
    double s = 0;
    for (float v : Values(l)) s += v;
    return s * scale;
  };
  for (const char* name : {"embed.wte", "embed.wpe", "blocks.0.attn.qkv.weight",
                           "blocks.1.mlp.fc.bias", "blocks.1.ln2.weight", "ln_f.bias"}) {
    Parameter* p = gpt->FindParameter(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_LT(RelativeError(Values(p->grad), NumericalGradient(p->value, loss, 1e-3f)), 2e-2)
        << name;
  }
}

// Trains on one fixed batch with AdamW: a correct model memorizes it.
double OverfitOneBatch(uint64_t seed, int steps, std::vector<float>* losses) {
  GptConfig c = Tiny();
  c.set_d_model(32);
  auto gpt = *Gpt::Create(c, 8);
  WEFT_CHECK_OK(MaterializeParameters(*gpt, {.seed = seed}));
  std::vector<OptimTarget> targets;
  for (Parameter* p : gpt->Parameters()) targets.push_back({p->name(), p->value, p->grad, p->weight_decay()});
  auto opt = *Optimizer::Create({.weight_decay = 0.0f}, targets, Device::Cpu(), nullptr, nullptr);
  std::vector<int32_t> seq = {1, 5, 2, 8, 3, 9, 4, 7, 6, 0, 10, 2, 5, 1, 3, 8, 9, 4};
  std::vector<int32_t> xs, ys;
  for (int b = 0; b < 2; ++b) {
    for (int t = 0; t < 8; ++t) {
      xs.push_back(seq[b * 9 + t]);
      ys.push_back(seq[b * 9 + t + 1]);
    }
  }
  Tensor x = Tokens(xs, 2, 8), y = Tokens(ys, 2, 8);
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  double last = 0;
  for (int step = 1; step <= steps; ++step) {
    WEFT_CHECK_OK(ZeroGrads(*gpt));
    Tensor l = *gpt->ForwardLoss(ctx, x, y, 1.0f / 16);
    WEFT_CHECK_OK(gpt->BackwardFromLoss(ctx));
    WEFT_CHECK_OK(opt->Step(ctx.kernel(), {.lr = 1e-2f, .step = step}));
    double s = 0;
    for (float v : Values(l)) s += v;
    last = s / 16;
    if (losses) losses->push_back(static_cast<float>(last));
  }
  return last;
}

TEST(GptTest, OverfitsOneBatchToNearZeroLoss) {
  std::vector<float> losses;
  const double final_loss = OverfitOneBatch(1, 200, &losses);
  EXPECT_GT(losses.front(), 2.0);  // ~log(11) at init
  EXPECT_LT(final_loss, 0.05) << "first " << losses.front();
}

TEST(GptTest, SameSeedGivesBitwiseIdenticalLosses) {
  std::vector<float> a, b;
  OverfitOneBatch(7, 20, &a);
  OverfitOneBatch(7, 20, &b);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace weft
