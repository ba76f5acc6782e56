#include "core/nn/module.h"

#include <string>
#include <vector>

#include "core/nn/dropout.h"
#include "core/nn/linear.h"
#include "core/nn/materialize.h"
#include "core/nn/sequential.h"
#include "core/nn/transformer_block.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

class Stack : public Module {
 public:
  explicit Stack(int n) : Module("Stack") {
    for (int i = 0; i < n; ++i) {
      RegisterSwappableModule(std::to_string(i), std::make_unique<Linear>(4, 4, Linear::Options{}));
    }
  }
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override {
    Tensor h = x;
    for (Module* m : children()) {
      auto r = m->CallForward(ctx, h);
      if (!r.ok()) return r.status();
      h = *r;
    }
    return h;
  }
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override {
    Tensor g = dy;
    auto kids = children();
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) {
      auto r = (*it)->CallBackward(ctx, g);
      if (!r.ok()) return r.status();
      g = *r;
    }
    return g;
  }
};

// Adding a child costs O(1): a Sequential of 200000 modules builds at once
// (building a 100000-block GPT took minutes before, quadratic in the blocks).
TEST(ModuleTest, ManyChildrenBuildInLinearTime) {
  Sequential seq;
  for (int i = 0; i < 200000; ++i) seq.Append(std::make_unique<Dropout>(0.0f));
  EXPECT_EQ(seq.size(), 200000);
  EXPECT_EQ(seq.child("199999")->name(), "199999");
}

TEST(ModuleTest, DottedNamesAndTraversal) {
  TransformerBlock block({.channels = 8, .num_heads = 2, .mlp_hidden = 16});
  std::vector<std::string> names;
  for (Parameter* p : block.Parameters()) names.push_back(p->name());
  EXPECT_EQ(names.front(), "ln1.weight");
  EXPECT_NE(std::find(names.begin(), names.end(), "attn.qkv.weight"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "mlp.proj.bias"), names.end());
  EXPECT_NE(block.FindModule("mlp.fc"), nullptr);
  EXPECT_EQ(block.FindModule("mlp.fc")->type_name(), "Linear");
  EXPECT_NE(block.FindParameter("attn.proj.weight"), nullptr);
  EXPECT_EQ(block.FindParameter("nope"), nullptr);
}

TEST(ModuleTest, HooksFireInOrderAroundForwardAndBackward) {
  Stack s(2);
  ASSERT_TRUE(MaterializeParameters(s, {}).ok());
  std::vector<std::string> log;
  for (Module* m : s.children()) {
    for (auto point : {Module::HookPoint::kPreForward, Module::HookPoint::kPostForward,
                       Module::HookPoint::kPreBackward, Module::HookPoint::kPostBackward}) {
      m->AddHook(point, [&log, point](Module& mod, RunContext&) {
        log.push_back(mod.name() + ":" + std::to_string(static_cast<int>(point)));
        return absl::OkStatus();
      });
    }
  }
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  Tensor x = *Tensor::Zeros({1, 4}, DType::kF32);
  Tensor y = *s.CallForward(ctx, x);
  ASSERT_TRUE(s.CallBackward(ctx, y).ok());
  EXPECT_EQ(log, (std::vector<std::string>{"0:0", "0:1", "1:0", "1:1", "1:2", "1:3", "0:2",
                                           "0:3"}));
}

TEST(ModuleTest, FailingHookStopsTheCallWithContext) {
  Stack s(1);
  ASSERT_TRUE(MaterializeParameters(s, {}).ok());
  int id = s.children()[0]->AddHook(Module::HookPoint::kPreForward, [](Module&, RunContext&) {
    return absl::UnavailableError("peer gone");
  });
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  Tensor x = *Tensor::Zeros({1, 4}, DType::kF32);
  absl::StatusOr<Tensor> y = s.CallForward(ctx, x);
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("hook on '0': peer gone"), std::string::npos);
  s.children()[0]->RemoveHook(id);
  EXPECT_TRUE(s.CallForward(ctx, x).ok());
}

TEST(ModuleTest, ReplaceChildKeepsNames) {
  Stack s(2);
  auto old = s.ReplaceChild("1", std::make_unique<Linear>(4, 4, Linear::Options{.bias = false}));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(s.Parameters().back()->name(), "1.weight");
  absl::StatusOr<std::unique_ptr<Module>> missing =
      s.ReplaceChild("7", std::make_unique<Linear>(4, 4, Linear::Options{}));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("one of [0, 1]"), std::string::npos);
}

// A parent that calls a child through its own type cannot have it swapped:
// the parent would keep calling the old one. Children reached through
// Module (child()) can be swapped.
TEST(ModuleTest, PinnedChildrenCannotBeSwapped) {
  TransformerBlock block({.channels = 8, .num_heads = 2, .mlp_hidden = 16});
  EXPECT_FALSE(block.swappable("ln1"));
  EXPECT_TRUE(block.swappable("attn"));
  auto pinned = block.ReplaceChild("ln1", std::make_unique<Linear>(8, 8, Linear::Options{}));
  EXPECT_EQ(pinned.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(pinned.status().message().find("uses its child 'ln1' through its own type"),
            std::string::npos)
      << pinned.status();
  EXPECT_EQ(block.child("ln1")->type_name(), "LayerNorm");  // untouched
  auto swapped = block.ReplaceChild("mlp", std::make_unique<Linear>(8, 8, Linear::Options{}));
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_EQ((*swapped)->type_name(), "Mlp");
  EXPECT_EQ(block.child("mlp")->type_name(), "Linear");
}

TEST(ModuleTest, BackwardWithoutForwardIsAnError) {
  Linear l(4, 4, {});
  ASSERT_TRUE(MaterializeParameters(l, {}).ok());
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  Tensor dy = *Tensor::Zeros({1, 4}, DType::kF32);
  EXPECT_EQ(l.CallBackward(ctx, dy).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace weft
