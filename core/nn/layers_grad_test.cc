// Finite-difference gradient checks for every layer, on the CPU kernels:
// each layer's Backward must match d/dθ of sum(Forward(x) * r) for its input
// and for every parameter.
#include <memory>

#include "core/nn/attention.h"
#include "core/nn/dropout.h"
#include "core/nn/embedding.h"
#include "core/nn/gqa_attention.h"
#include "core/nn/layer_norm.h"
#include "core/nn/linear.h"
#include "core/nn/materialize.h"
#include "core/nn/mlp.h"
#include "core/nn/recompute.h"
#include "core/nn/rope.h"
#include "core/nn/swiglu_mlp.h"
#include "core/nn/transformer_block.h"
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

void Materialize(Module& m, uint64_t seed = 1) {
  // Larger init than GPT's 0.02 so every path carries signal.
  ASSERT_TRUE(MaterializeParameters(m, {.seed = seed}).ok());
  for (Parameter* p : m.Parameters()) {
    if (p->init().kind == InitSpec::Kind::kNormal) {
      Tensor r = RandomTensor(p->shape(), seed + p->numel(), 0.5f);
      ASSERT_TRUE(p->value.CopyFrom(r).ok());
    }
  }
}

// Checks d(sum(f(x) * r))/dx and /dparams against central differences.
// With `split_backward`, the backward runs as a zero-bubble B (weight
// gradients queued) and the queued W after it.
void CheckGradients(Module& m, Tensor x, double tol, float step = 1e-2f,
                    bool input_has_grad = true, bool split_backward = false) {
  RunContext ctx = Ctx();
  Tensor y = *m.CallForward(ctx, x);
  Tensor r = RandomTensor(y.shape(), 99);
  ASSERT_TRUE(ZeroGrads(m).ok());
  ctx.defer_weight_grads = split_backward;
  const std::vector<float> r_values = Values(r);
  absl::StatusOr<Tensor> dx = m.CallBackward(ctx, r);
  ASSERT_TRUE(dx.ok()) << dx.status();
  // dy belongs to the caller (a block's residual gradient is read, not added onto).
  EXPECT_EQ(Values(r), r_values) << "Backward changed its dy";
  const std::vector<float> dx_values = input_has_grad ? Values(*dx) : std::vector<float>{};
  if (split_backward) {
    ASSERT_GT(ctx.store().NumDeferred(ctx.slot), 0);
    // Callers reuse gradient buffers before W runs.
    if (input_has_grad) {
      ASSERT_TRUE(dx->Zero().ok());
    }
    ASSERT_TRUE(r.Zero().ok());
    ASSERT_TRUE(ctx.store().RunDeferred(ctx.slot).ok());
    r = RandomTensor(y.shape(), 99);
  }
  auto loss = [&] {
    RunContext c = Ctx();
    Tensor out = *m.CallForward(c, x);
    m.ReleaseActivationsRecursive(c);
    return WeightedSum(out, r);
  };
  if (input_has_grad) {
    EXPECT_LT(RelativeError(dx_values, NumericalGradient(x, loss, step)), tol) << "input";
  }
  for (Parameter* p : m.Parameters()) {
    std::vector<float> analytic = Values(p->grad);
    EXPECT_LT(RelativeError(analytic, NumericalGradient(p->value, loss, step)), tol) << p->name();
  }
}

TEST(LayersGradTest, Linear) {
  Linear m(5, 4, {});
  Materialize(m);
  CheckGradients(m, RandomTensor({2, 3, 5}, 1), 1e-3);
}

TEST(LayersGradTest, LinearWithFusedGelu) {
  Linear m(5, 4, {.gelu = true});
  Materialize(m);
  CheckGradients(m, RandomTensor({3, 5}, 1), 1e-2, 1e-3f);
}

TEST(LayersGradTest, LayerNorm) {
  LayerNorm m(8);
  Materialize(m);
  CheckGradients(m, RandomTensor({3, 8}, 1), 1e-2, 1e-3f);
}

TEST(LayersGradTest, RmsNorm) {
  LayerNorm m(8, 1e-5f, NormKind::kRms);
  Materialize(m);
  ASSERT_EQ(m.Parameters().size(), 1u);  // weight only
  CheckGradients(m, RandomTensor({3, 8}, 1), 1e-2, 1e-3f);
}

TEST(LayersGradTest, SwiGluMlp) {
  SwiGluMlp m(6, 10, 0.02f, 0.02f);
  Materialize(m);
  CheckGradients(m, RandomTensor({2, 3, 6}, 1), 1e-2, 1e-3f);
}

std::shared_ptr<RopeTable> Rope(int64_t head_dim) {
  return *RopeTable::Create({.head_dim = head_dim, .max_positions = 16, .theta = 10000.0});
}

TEST(LayersGradTest, GroupedQueryAttentionWithQkNorm) {
  GroupedQueryAttention m({.channels = 8, .num_heads = 4, .num_kv_heads = 2, .head_dim = 4,
                           .qk_norm = true},
                          Rope(4));
  Materialize(m);
  ASSERT_NE(m.FindParameter("q_norm.weight"), nullptr);
  // Weights away from one, so their gradients matter.
  for (const char* n : {"q_norm.weight", "k_norm.weight"}) {
    ASSERT_TRUE(m.FindParameter(n)->value.CopyFrom(RandomTensor({4}, 3, 1.5f)).ok());
  }
  CheckGradients(m, RandomTensor({2, 5, 8}, 1), 1e-2, 1e-3f);
}

TEST(LayersGradTest, GroupedQueryAttention) {
  GroupedQueryAttention m({.channels = 8, .num_heads = 4, .num_kv_heads = 2, .head_dim = 4},
                          Rope(4));
  Materialize(m);
  CheckGradients(m, RandomTensor({2, 5, 8}, 1), 1e-2, 1e-3f);
}

// The Llama block: RMSNorm, grouped-query attention with RoPE, SwiGLU.
std::unique_ptr<TransformerBlock> LlamaBlock() {
  return std::make_unique<TransformerBlock>(
      std::make_unique<LayerNorm>(8, 1e-5f, NormKind::kRms),
      std::make_unique<GroupedQueryAttention>(
          GqaAttentionConfig{.channels = 8, .num_heads = 2, .num_kv_heads = 1, .head_dim = 4},
          Rope(4)),
      std::make_unique<LayerNorm>(8, 1e-5f, NormKind::kRms),
      std::make_unique<SwiGluMlp>(8, 12, 0.02f, 0.02f));
}

TEST(LayersGradTest, LlamaBlock) {
  auto m = LlamaBlock();
  Materialize(*m);
  CheckGradients(*m, RandomTensor({2, 3, 8}, 1), 2e-2, 1e-3f);
}

TEST(LayersGradTest, LlamaBlockWithBackwardSplitIntoBAndW) {
  auto m = LlamaBlock();
  Materialize(*m);
  CheckGradients(*m, RandomTensor({2, 3, 8}, 1), 2e-2, 1e-3f, true, /*split_backward=*/true);
}

TEST(LayersGradTest, Embedding) {
  TokenPositionEmbedding m(7, 6, 4);
  Materialize(m);
  Tensor tokens = *Tensor::FromVector<int32_t>(std::vector<int32_t>{1, 6, 1, 0, 2, 2}, {2, 3});
  CheckGradients(m, tokens, 1e-3, 1e-2f, /*input_has_grad=*/false);
}

TEST(LayersGradTest, CausalSelfAttention) {
  CausalSelfAttention m(8, 2, 0.02f, 0.02f, 0.0f);
  Materialize(m);
  CheckGradients(m, RandomTensor({2, 4, 8}, 1), 1e-2, 1e-3f);
}

TEST(LayersGradTest, MlpWithCrossLayerGeluFusion) {
  Mlp m(6, 12, 0.02f, 0.02f, 0.0f);
  Materialize(m);
  CheckGradients(m, RandomTensor({2, 3, 6}, 1), 1e-2, 1e-3f);
}

TEST(LayersGradTest, TransformerBlock) {
  TransformerBlock m({.channels = 8, .num_heads = 2, .mlp_hidden = 16});
  Materialize(m);
  CheckGradients(m, RandomTensor({2, 3, 8}, 1), 2e-2, 1e-3f);
}

TEST(LayersGradTest, TransformerBlockWithBackwardSplitIntoBAndW) {
  TransformerBlock m({.channels = 8, .num_heads = 2, .mlp_hidden = 16});
  Materialize(m);
  CheckGradients(m, RandomTensor({2, 3, 8}, 1), 2e-2, 1e-3f, true, /*split_backward=*/true);
}

TEST(LayersGradTest, DropoutIsAFixedLinearMapPerSeed) {
  Dropout m(0.3f);
  CheckGradients(m, RandomTensor({64}, 1), 1e-4);
}

TEST(LayersGradTest, DropoutIsIdentityWhenEvaluating) {
  Dropout m(0.5f);
  RunContext ctx = Ctx();
  ctx.training = false;
  Tensor x = RandomTensor({16}, 1);
  EXPECT_EQ(Values(*m.CallForward(ctx, x)), Values(x));
}

// A wrapper module so Recompute has a parent to replace a child in.
class Holder : public Module {
 public:
  Holder() : Module("Holder") {
    RegisterSwappableModule("block", std::make_unique<TransformerBlock>(
                                TransformerBlockConfig{.channels = 8, .num_heads = 2,
                                                       .mlp_hidden = 16, .dropout = 0.2f}));
  }
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override {
    return child("block")->CallForward(ctx, x);
  }
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override {
    return child("block")->CallBackward(ctx, dy);
  }
};

TEST(RecomputeTest, SameOutputsAndGradientsAsWithout) {
  Holder plain, wrapped;
  Materialize(plain, 3);
  ASSERT_TRUE(EnableRecompute(wrapped, "block").ok());
  Materialize(wrapped, 3);
  // Names are unchanged by the wrapper.
  std::vector<std::string> a, b;
  for (Parameter* p : plain.Parameters()) a.push_back(p->name());
  for (Parameter* p : wrapped.Parameters()) b.push_back(p->name());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.front(), "block.ln1.weight");
  Tensor x = RandomTensor({2, 5, 8}, 1), r = RandomTensor({2, 5, 8}, 2);
  RunContext ctx = Ctx();
  ctx.dropout_seed = 1234;  // dropout on: the recompute must reproduce the mask
  Tensor y1 = *plain.CallForward(ctx, x);
  Tensor y2 = *wrapped.CallForward(ctx, x);
  EXPECT_EQ(Values(y1), Values(y2));
  Tensor dx1 = *plain.CallBackward(ctx, r);
  Tensor dx2 = *wrapped.CallBackward(ctx, r);
  EXPECT_EQ(Values(dx1), Values(dx2));
  for (size_t i = 0; i < plain.Parameters().size(); ++i) {
    EXPECT_EQ(Values(plain.Parameters()[i]->grad), Values(wrapped.Parameters()[i]->grad));
  }
}

}  // namespace
}  // namespace weft
