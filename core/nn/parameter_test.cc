#include "core/nn/parameter.h"

#include <cmath>

#include "core/nn/linear.h"
#include "core/nn/materialize.h"
#include "core/tensor/cpu_allocator.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(ParameterTest, InitIsAFunctionOfSeedAndName) {
  Linear a(64, 32, {.init_std = 0.02f}), b(64, 32, {.init_std = 0.02f});
  ASSERT_TRUE(MaterializeParameters(a, {.seed = 5}).ok());
  ASSERT_TRUE(MaterializeParameters(b, {.seed = 5}).ok());
  EXPECT_EQ(*a.weight()->value.ToFloats(), *b.weight()->value.ToFloats());
  ASSERT_TRUE(MaterializeParameters(b, {.seed = 6}).ok());
  EXPECT_NE(*a.weight()->value.ToFloats(), *b.weight()->value.ToFloats());
}

TEST(ParameterTest, NormalInitHasTheRequestedStd) {
  Parameter p("w", {256, 256}, InitSpec::Normal(0.02f), true);
  p.set_name("w");
  Tensor t = *InitialValue(p, 1);
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s += t.data<float>()[i];
    s2 += double(t.data<float>()[i]) * t.data<float>()[i];
  }
  const double n = t.numel();
  EXPECT_NEAR(s / n, 0.0, 1e-3);
  EXPECT_NEAR(std::sqrt(s2 / n), 0.02, 5e-4);
}

TEST(ParameterTest, SliceInitEqualsSliceOfFullInit) {
  Parameter p("blocks.0.w", {10, 7}, InitSpec::Normal(1.f), true);
  p.set_name("blocks.0.w");
  Tensor full = *InitialValue(p, 9);
  Tensor part = *Tensor::Empty({13}, DType::kF32);
  ASSERT_TRUE(InitParameterSlice(p, 9, 20, part).ok());
  for (int i = 0; i < 13; ++i) EXPECT_EQ(part.data<float>()[i], full.data<float>()[20 + i]);
  EXPECT_FALSE(InitParameterSlice(p, 9, 60, part).ok());
}

TEST(ParameterTest, MaterializeUsesTheGivenAllocatorAndZeroesGrads) {
  CpuAlignedAllocator alloc("state");  // outlives the tensors it backs
  Linear l(8, 4, {});
  ASSERT_TRUE(MaterializeParameters(l, {.seed = 1, .allocator = &alloc}).ok());
  // weight 32 + bias 4 floats, value and grad.
  EXPECT_EQ(alloc.Stats().allocated_bytes, 2 * 36 * 4);
  const std::vector<float> grads = *l.weight()->grad.ToFloats();
  for (float g : grads) EXPECT_EQ(g, 0.f);
  EXPECT_EQ(*l.bias()->value.ToFloats(), std::vector<float>(4, 0.f));
}

}  // namespace
}  // namespace weft
