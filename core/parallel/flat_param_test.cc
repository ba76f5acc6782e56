#include "core/parallel/flat_param.h"

#include "gtest/gtest.h"

namespace weft {
namespace {

std::vector<std::unique_ptr<Parameter>> Params() {
  std::vector<std::unique_ptr<Parameter>> v;
  v.push_back(std::make_unique<Parameter>("a", Shape{2, 3}, InitSpec::Zeros(), true));
  v.push_back(std::make_unique<Parameter>("b", Shape{3}, InitSpec::Zeros(), false));
  for (auto& p : v) p->set_name(p->local_name());
  return v;
}

TEST(FlatParamTest, LayoutPaddingAndShards) {
  auto owned = Params();
  FlatParamGroup g("g", {owned[0].get(), owned[1].get()}, 4, 1);
  EXPECT_EQ(g.numel(), 9);
  EXPECT_EQ(g.shard_numel(), 3);
  EXPECT_EQ(g.padded_numel(), 12);
  EXPECT_EQ(g.offset(1), 6);
}

TEST(FlatParamTest, BindPackAndViews) {
  auto owned = Params();
  owned[0]->value = *Tensor::FromFloats({1, 2, 3, 4, 5, 6}, {2, 3});
  owned[1]->value = *Tensor::FromFloats({7, 8, 9}, {3});
  FlatParamGroup g("g", {owned[0].get(), owned[1].get()}, 2, 0);
  Tensor full = *Tensor::Empty({g.padded_numel()}, DType::kF32);
  ASSERT_TRUE(g.PackValues(full, nullptr).ok());
  EXPECT_EQ(*full.ToFloats(), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 0}));
  g.BindValues(full);
  EXPECT_EQ(owned[1]->value.shape(), (Shape{3}));
  full.data<float>()[7] = 42;  // writes through the view
  EXPECT_EQ(owned[1]->value.ToFloats()->at(1), 42);
  g.UnbindValues();
  EXPECT_FALSE(owned[0]->value.defined());
}

TEST(FlatParamTest, ShardTargetsSplitAtParameterBoundaries) {
  auto owned = Params();
  // 9 elements over 2 shards of 5: shard 1 = [5, 10) overlaps a[5] and b.
  FlatParamGroup g("g", {owned[0].get(), owned[1].get()}, 2, 1);
  Tensor value = *Tensor::Zeros({5}, DType::kF32), grad = *Tensor::Zeros({5}, DType::kF32);
  std::vector<OptimTarget> t = g.ShardTargets(value, grad);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "a[5:6]");
  EXPECT_EQ(t[0].value.numel(), 1);
  EXPECT_TRUE(t[0].weight_decay);
  EXPECT_EQ(t[1].name, "b[0:3]");
  EXPECT_EQ(t[1].value.numel(), 3);
  EXPECT_FALSE(t[1].weight_decay);
  // The padding element (index 9) belongs to no target.
}

}  // namespace
}  // namespace weft
