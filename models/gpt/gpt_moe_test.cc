// GPT with mixture-of-experts blocks: which blocks become MoE, the expert
// size that keeps a token's active parameters equal to the dense MLP's,
// config errors, and a forward/backward through the whole model.
#include <string>
#include <vector>

#include "core/nn/materialize.h"
#include "core/nn/moe.h"
#include "gtest/gtest.h"
#include "models/gpt/gpt.h"

namespace weft {
namespace {

GptConfig TinyMoe() {
  GptConfig c;
  c.set_n_layer(4);
  c.set_n_head(2);
  c.set_d_model(16);
  c.set_vocab_size(11);
  c.set_vocab_pad_multiple(8);
  c.set_max_seq_len(8);
  c.set_moe_every(2);
  c.set_num_experts(4);
  c.set_top_k(2);
  return c;
}

TEST(GptMoeTest, EveryKthBlockIsAMixtureOfExperts) {
  auto gpt = Gpt::Create(TinyMoe(), 8);
  ASSERT_TRUE(gpt.ok()) << gpt.status();
  std::vector<std::string> types;
  for (Module* block : (*gpt)->blocks()->children()) types.push_back(block->child("mlp")->type_name());
  EXPECT_EQ(types, (std::vector<std::string>{"Mlp", "MoeLayer", "Mlp", "MoeLayer"}));
  // Expert hidden = mlp_ratio / top_k x d_model = 32: two active experts
  // hold as many weights as the dense MLP (hidden 64).
  Parameter* fc = (*gpt)->FindParameter("blocks.1.mlp.experts.fc_weight");
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(fc->shape(), (Shape{4, 32, 16}));
  EXPECT_NE((*gpt)->FindParameter("blocks.3.mlp.router.weight"), nullptr);
  EXPECT_NE((*gpt)->Summary().find("MoE every 2: 4 experts top-2 dropless"), std::string::npos);
}

TEST(GptMoeTest, ConfigErrors) {
  GptConfig c = TinyMoe();
  c.set_num_experts(1);
  absl::Status s = Gpt::Create(c, 8).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("top_k=2 with num_experts=1"), std::string::npos) << s;
  c = TinyMoe();
  c.set_top_k(c.num_experts() + 1);  // more choices than experts
  EXPECT_FALSE(Gpt::Create(c, 8).ok());
  c.set_top_k(c.num_experts());  // any k up to the experts
  EXPECT_TRUE(Gpt::Create(c, 8).ok());
  c = TinyMoe();
  c.set_moe_every(-1);
  EXPECT_FALSE(Gpt::Create(c, 8).ok());
}

TEST(GptMoeTest, TrainsThroughForwardAndBackward) {
  auto gpt = Gpt::Create(TinyMoe(), 4);
  ASSERT_TRUE(gpt.ok());
  ASSERT_TRUE(MaterializeParameters(**gpt, {.seed = 3}).ok());
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  Tensor in = *Tensor::FromVector<int32_t>(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  Tensor tg = *Tensor::FromVector<int32_t>(std::vector<int32_t>{2, 3, 4, 5, 6, 7, 8, 9}, {2, 4});
  auto losses = (*gpt)->ForwardLoss(ctx, in, tg, 1.0f / 8);
  ASSERT_TRUE(losses.ok()) << losses.status();
  ASSERT_TRUE((*gpt)->BackwardFromLoss(ctx).ok());
  Parameter* router = (*gpt)->FindParameter("blocks.1.mlp.router.weight");
  // Named: a range-for over *StatusOr-temporary reads it after it died.
  const std::vector<float> grad = *router->grad.ToFloats();
  double norm = 0;
  for (float v : grad) norm += v * v;
  EXPECT_GT(norm, 0);
  std::vector<std::pair<std::string, double>> metrics;
  (*gpt)->AppendStepMetrics(&metrics);
  EXPECT_EQ(metrics.size(), 6u);
}

}  // namespace
}  // namespace weft
