// MoeLayer: finite-difference gradients of the task output plus the
// balance and z-losses, for top-1 and top-2, dropless and with drops; the
// drop policy's effect on the output; and the routing metrics.
#include "core/nn/moe.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/nn/materialize.h"
#include "core/testing/grad_check.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

using ::weft::testing::NumericalGradient;
using ::weft::testing::RandomTensor;
using ::weft::testing::RelativeError;
using ::weft::testing::Values;
using ::weft::testing::WeightedSum;

RunContext Ctx() { return *RunContext::Create(Device::Cpu(), DType::kF32); }

void Materialize(Module& m) {
  ASSERT_TRUE(MaterializeParameters(m, {.seed = 7}).ok());
  for (Parameter* p : m.Parameters()) {
    if (p->init().kind == InitSpec::Kind::kNormal) {
      ASSERT_TRUE(p->value.CopyFrom(RandomTensor(p->shape(), 11 + p->numel(), 0.5f)).ok());
    }
  }
}

MoeConfig Config(int k, double capacity_factor) {
  return {.channels = 6, .hidden = 8, .num_experts = 4, .top_k = k,
          .capacity_factor = capacity_factor, .aux_loss_coef = 0.5f, .z_loss_coef = 0.1f};
}

// Objective: sum(y * r) + N * (aux_coef * balance + z_coef * z), the
// auxiliary terms weighted as the layer does with dloss_scale = 1.
void CheckGradients(const MoeConfig& config) {
  MoeLayer m(config);
  Materialize(m);
  Tensor x = RandomTensor({2, 5, 6}, 1);
  const int64_t n = 10;
  RunContext ctx = Ctx();
  Tensor y = *m.CallForward(ctx, x);
  m.TakeStats();
  Tensor r = RandomTensor(y.shape(), 99);
  ASSERT_TRUE(ZeroGrads(m).ok());
  absl::StatusOr<Tensor> dx = m.CallBackward(ctx, r);
  ASSERT_TRUE(dx.ok()) << dx.status();
  auto loss = [&] {
    RunContext c = Ctx();
    Tensor out = *m.CallForward(c, x);
    m.ReleaseActivationsRecursive(c);
    c.activations->Clear();
    MoeStats s = m.TakeStats();
    return WeightedSum(out, r) +
           n * (config.aux_loss_coef * s.aux_loss + config.z_loss_coef * s.z_loss);
  };
  EXPECT_LT(RelativeError(Values(*dx), NumericalGradient(x, loss, 1e-3f)), 1e-2) << "input";
  for (Parameter* p : m.Parameters()) {
    EXPECT_LT(RelativeError(Values(p->grad), NumericalGradient(p->value, loss, 1e-3f)), 1e-2)
        << p->name();
  }
}

TEST(MoeLayerTest, GradientsTopTwoDropless) { CheckGradients(Config(2, 0.0)); }
TEST(MoeLayerTest, GradientsTopOneDropless) { CheckGradients(Config(1, 0.0)); }
TEST(MoeLayerTest, GradientsTopTwoWithDrops) { CheckGradients(Config(2, 0.5)); }
TEST(MoeLayerTest, GradientsTwoRoutingGroupsWithDrops) {
  MoeConfig c = Config(2, 0.75);
  c.routing_groups = 2;
  CheckGradients(c);
}

// The Llama variants: SwiGLU experts, top-3 of 4 with raw or renormalised
// gates, sigmoid scores, and a shared expert beside the routed ones.
MoeConfig SwiGlu(int k, bool normalize) {
  MoeConfig c = Config(k, 0.0);
  c.expert_activation = ExpertActivation::kSwiGlu;
  c.normalize_gates = normalize;
  return c;
}
TEST(MoeLayerTest, GradientsSwiGluTopThreeRenormalised) { CheckGradients(SwiGlu(3, true)); }
TEST(MoeLayerTest, GradientsSwiGluTopThreeRaw) { CheckGradients(SwiGlu(3, false)); }
TEST(MoeLayerTest, GradientsSigmoidScores) {
  MoeConfig c = SwiGlu(2, true);
  c.router_score = RouterScore::kSigmoid;
  c.z_loss_coef = 0;
  CheckGradients(c);
}
TEST(MoeLayerTest, GradientsWithSharedExpertAndDrops) {
  MoeConfig c = SwiGlu(2, true);
  c.shared_hidden = 5;
  c.capacity_factor = 0.5;
  CheckGradients(c);
}

TEST(MoeLayerTest, SharedExpertAddsItsOutputToTheRoutedOnes) {
  MoeConfig routed = SwiGlu(2, true), both = routed;
  both.shared_hidden = 5;
  MoeLayer a(routed), b(both);
  Materialize(a);
  Materialize(b);
  for (Parameter* p : a.Parameters()) {
    ASSERT_TRUE(b.FindParameter(p->name())->value.CopyFrom(p->value).ok());
  }
  ASSERT_NE(b.shared(), nullptr);
  Tensor x = RandomTensor({2, 3, 6}, 4);
  RunContext ca = Ctx(), cb = Ctx(), cs = Ctx();
  const std::vector<float> ya = Values(*a.CallForward(ca, x)), yb = Values(*b.CallForward(cb, x));
  const std::vector<float> ys = Values(*b.shared()->CallForward(cs, x.View({6, 6})));
  for (size_t i = 0; i < ya.size(); ++i) EXPECT_NEAR(yb[i], ya[i] + ys[i], 1e-6) << i;
}

TEST(MoeLayerTest, RefusesBadRouterConfigs) {
  MoeConfig c = SwiGlu(1, true);  // one renormalised gate is the constant 1
  EXPECT_EQ(ValidateMoeConfig(c).code(), absl::StatusCode::kInvalidArgument);
  c = SwiGlu(2, true);
  c.router_score = RouterScore::kSigmoid;  // z-loss 0.1 from Config
  EXPECT_EQ(ValidateMoeConfig(c).code(), absl::StatusCode::kInvalidArgument);
  c = Config(2, 0.0);
  c.shared_hidden = 4;  // GELU experts have no shared expert
  EXPECT_EQ(ValidateMoeConfig(c).code(), absl::StatusCode::kInvalidArgument);
  c = SwiGlu(5, true);  // more choices than experts
  EXPECT_EQ(ValidateMoeConfig(c).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateMoeConfig(SwiGlu(4, true)).ok());
}

TEST(MoeLayerTest, RoutingGroupsRouteEachGroupAlone) {
  // Samples {0, 2} and {1, 3} of a batch of 4, routed as two groups with
  // drops, give the outputs of two layers each seeing its own 2 samples.
  MoeConfig c = Config(1, 0.5);
  c.routing_groups = 2;
  MoeLayer grouped(c);
  Materialize(grouped);
  c.routing_groups = 1;
  MoeLayer alone(c);
  Materialize(alone);
  Tensor x = RandomTensor({4, 3, 6}, 5);
  RunContext ctx = Ctx();
  std::vector<float> y = Values(*grouped.CallForward(ctx, x));
  for (int g = 0; g < 2; ++g) {
    Tensor part = *Tensor::Zeros({2, 3, 6}, DType::kF32);
    ASSERT_TRUE(part.Slice(0, 0, 1).CopyFrom(x.Slice(0, g, g + 1)).ok());
    ASSERT_TRUE(part.Slice(0, 1, 2).CopyFrom(x.Slice(0, g + 2, g + 3)).ok());
    std::vector<float> yp = Values(*alone.CallForward(ctx, part));
    for (int i = 0; i < 18; ++i) {
      EXPECT_FLOAT_EQ(yp[i], y[g * 18 + i]);
      EXPECT_FLOAT_EQ(yp[18 + i], y[(g + 2) * 18 + i]);
    }
  }
}

TEST(MoeLayerTest, DroppedTokensGetZeroOutput) {
  // Capacity 1 per expert for 10 tokens x 1 choice over 4 experts: at least
  // 6 tokens are dropped and their MoE output is exactly 0 (the block's
  // residual carries them).
  MoeConfig c = Config(1, 0.4);
  MoeLayer m(c);
  Materialize(m);
  RunContext ctx = Ctx();
  Tensor y = *m.CallForward(ctx, RandomTensor({10, 6}, 3));
  std::vector<float> v = Values(y);
  int zero_rows = 0;
  for (int t = 0; t < 10; ++t) {
    bool zero = true;
    for (int j = 0; j < 6; ++j) zero = zero && v[t * 6 + j] == 0.f;
    zero_rows += zero;
  }
  EXPECT_GE(zero_rows, 6);
  std::vector<std::pair<std::string, double>> metrics;
  AppendMoeMetrics(m, &metrics);
  std::map<std::string, double> got(metrics.begin(), metrics.end());
  EXPECT_EQ(got.at("moe_dropped_frac"), zero_rows / 10.0);
  EXPECT_GT(got.at("moe_aux_loss"), 0.0);
  // Loads average 1 by construction; this routing overflows its experts'
  // capacity, so the load is strictly uneven.
  EXPECT_LT(got.at("moe_load_min"), 1.0);
  EXPECT_GT(got.at("moe_load_max"), 1.0);
  // Taken: a second call reports nothing new.
  metrics.clear();
  AppendMoeMetrics(m, &metrics);
  EXPECT_TRUE(metrics.empty());
}

// A zero-bubble pipeline's split backward: B leaves the experts' weight
// gradients untouched and queues them; W gives the plain backward's, bitwise,
// and dx does not change.
TEST(MoeLayerTest, SplitBackwardQueuesTheExpertWeightGradientsForW) {
  MoeLayer m(Config(2, 0.5));
  Materialize(m);
  Tensor x = RandomTensor({2, 5, 6}, 1), r = RandomTensor({2, 5, 6}, 99);
  auto backward = [&](bool split) -> std::map<std::string, std::vector<float>> {
    RunContext ctx = Ctx();
    EXPECT_TRUE(ZeroGrads(m).ok());
    EXPECT_TRUE(m.CallForward(ctx, x).ok());
    m.TakeStats();
    ctx.defer_weight_grads = split;
    absl::StatusOr<Tensor> dx = m.CallBackward(ctx, r);
    ctx.defer_weight_grads = false;
    EXPECT_TRUE(dx.ok()) << dx.status();
    if (split) {
      EXPECT_GT(ctx.store().NumDeferred(ctx.slot), 0);
      for (Parameter* p : m.Parameters()) {
        if (p->name().find("_weight") == std::string::npos) continue;  // fc_weight, proj_weight
        const std::vector<float> g = Values(p->grad);
        EXPECT_EQ(std::count(g.begin(), g.end(), 0.f), static_cast<long>(g.size()))
            << p->name() << " written in B";
      }
      EXPECT_TRUE(ctx.store().RunDeferred(ctx.slot).ok());
    }
    std::map<std::string, std::vector<float>> grads;
    for (Parameter* p : m.Parameters()) grads[p->name()] = Values(p->grad);
    grads["dx"] = Values(*dx);
    return grads;
  };
  const auto plain = backward(false);
  const auto split = backward(true);
  int experts = 0;
  for (const auto& [name, values] : plain) {
    EXPECT_EQ(split.at(name), values) << name;
    experts += name.find("_weight") != std::string::npos;
  }
  EXPECT_EQ(experts, 2);
}

TEST(MoeLayerTest, RejectsTopKAboveExperts) {
  MoeConfig c = Config(2, 0.0);
  c.num_experts = 1;
  absl::Status s = ValidateMoeConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("top_k=2 with num_experts=1"), std::string::npos) << s;
  c.num_experts = 4;
  c.top_k = 3;  // any k up to the experts
  EXPECT_TRUE(ValidateMoeConfig(c).ok());
  c.num_experts = 32;
  c.top_k = kMaxRouterTopK + 1;  // past what the CUDA router holds
  EXPECT_FALSE(ValidateMoeConfig(c).ok());
}

}  // namespace
}  // namespace weft
