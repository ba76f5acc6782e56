#include "models/mlp/mlp_classifier.h"

#include "core/nn/materialize.h"
#include "core/testing/grad_check.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

using ::weft::testing::NumericalGradient;
using ::weft::testing::RandomTensor;
using ::weft::testing::RelativeError;
using ::weft::testing::Values;

TEST(MlpClassifierTest, LayerShapesAndNames) {
  auto m = *MlpClassifier::Create(MlpConfig());
  EXPECT_EQ(m->widths(), (std::vector<int64_t>{784, 256, 128, 10}));
  EXPECT_NE(m->FindParameter("layers.0.weight"), nullptr);
  EXPECT_EQ(m->FindParameter("layers.2.weight")->shape(), (Shape{10, 128}));
  EXPECT_EQ(m->Summary(), "MLP 784-256-128-10");
}

TEST(MlpClassifierTest, BadConfigsAreErrors) {
  MlpConfig c;
  c.set_hidden("256,x");
  EXPECT_NE(MlpClassifier::Create(c).status().message().find("'x'"), std::string::npos);
  c = MlpConfig();
  c.set_num_classes(1);
  EXPECT_FALSE(MlpClassifier::Create(c).ok());
}

TEST(MlpClassifierTest, GradientsMatchFiniteDifferences) {
  MlpConfig c;
  c.set_input_dim(6);
  c.set_hidden("5,4");
  c.set_num_classes(3);
  c.set_init_std(0.5f);
  auto m = *MlpClassifier::Create(c);
  ASSERT_TRUE(MaterializeParameters(*m, {.seed = 2}).ok());
  Tensor x = RandomTensor({4, 6}, 1);
  Tensor y = *Tensor::FromVector<int32_t>(std::vector<int32_t>{0, 2, 1, 2}, {4});
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  ASSERT_TRUE(m->ForwardLoss(ctx, x, y, 0.25f).ok());
  ASSERT_TRUE(m->BackwardFromLoss(ctx).ok());
  auto loss = [&] {
    RunContext e = *RunContext::Create(Device::Cpu(), DType::kF32);
    e.training = false;
    double s = 0;
    for (float v : Values(*m->ForwardLoss(e, x, y, 1))) s += v;
    return s * 0.25;
  };
  for (Parameter* p : m->Parameters()) {
    EXPECT_LT(RelativeError(Values(p->grad), NumericalGradient(p->value, loss, 1e-3f)), 1e-2)
        << p->name();
  }
}

}  // namespace
}  // namespace weft
