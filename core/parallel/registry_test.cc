#include "core/parallel/composer.h"
#include "core/parallel/strategy_registry.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

class Fake : public Strategy {
 public:
  Fake(std::string name, StrategyPhase phase, std::vector<std::string>* log)
      : name_(std::move(name)), phase_(phase), log_(log) {}
  std::string Name() const override { return name_; }
  StrategyPhase Phase() const override { return phase_; }
  std::vector<std::string> RequiredAxes() const override { return {}; }
  absl::Status Validate(const StrategyOptions& o, const comm::MeshLayout*) const override {
    if (o.extra.count("fail_" + name_)) return absl::InvalidArgumentError("nope");
    return absl::OkStatus();
  }
  absl::Status Apply(StrategyContext&) override {
    log_->push_back(name_);
    return absl::OkStatus();
  }

 private:
  std::string name_;
  StrategyPhase phase_;
  std::vector<std::string>* log_;
};

std::vector<std::string> applied;

WEFT_REGISTER_STRATEGY(fake_dp, [] {
  return std::make_unique<Fake>("fake_dp", StrategyPhase::kDataParallel, &applied);
});
WEFT_REGISTER_STRATEGY(fake_dp2, [] {
  return std::make_unique<Fake>("fake_dp2", StrategyPhase::kDataParallel, &applied);
});
WEFT_REGISTER_STRATEGY(fake_tp, [] {
  return std::make_unique<Fake>("fake_tp", StrategyPhase::kTensorParallel, &applied);
});

TEST(StrategyRegistryTest, UnknownNameListsRegistered) {
  auto s = CreateStrategy("fsdpp");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("fake_dp, fake_dp2, fake_tp"), std::string::npos);
  EXPECT_NE(s.status().message().find("--plugin"), std::string::npos);
}

TEST(StrategyRegistryTest, DuplicateNameIsAHardError) {
  EXPECT_DEATH(RegisterStrategy("fake_tp", [] { return nullptr; }), "registered twice");
}

TEST(ComposerTest, AppliesInPhaseOrderAfterValidatingAll) {
  applied.clear();
  ParallelState state;
  StrategyOptions options;
  StrategyContext ctx{.options = &options, .state = &state};
  ASSERT_TRUE(ComposeStrategies({"fake_dp", "fake_tp"}, ctx).ok());
  EXPECT_EQ(applied, (std::vector<std::string>{"fake_tp", "fake_dp"}));
  EXPECT_EQ(state.strategy_names, applied);

  applied.clear();
  options.extra["fail_fake_dp"] = "1";
  absl::Status s = ComposeStrategies({"fake_tp", "fake_dp"}, ctx);
  EXPECT_NE(s.message().find("strategy 'fake_dp': nope"), std::string::npos);
  EXPECT_TRUE(applied.empty());  // nothing applied when any validation fails
}

TEST(ComposerTest, TwoDataParallelStrategiesOrDuplicatesAreRejected) {
  StrategyOptions options;
  EXPECT_NE(ValidateStrategies({"fake_dp", "fake_dp2"}, options, nullptr).message().find(
                "at most one of"),
            std::string::npos);
  EXPECT_NE(ValidateStrategies({"fake_tp", "fake_tp"}, options, nullptr).message().find("twice"),
            std::string::npos);
}

TEST(ComposerTest, ParseStrategyList) {
  EXPECT_EQ(*ParseStrategyList(" ddp , fsdp"), (std::vector<std::string>{"ddp", "fsdp"}));
  EXPECT_TRUE(ParseStrategyList("")->empty());
  EXPECT_FALSE(ParseStrategyList("ddp,,fsdp").ok());
}

TEST(PluginTest, MissingLibraryIsAClearError) {
  absl::Status s = LoadStrategyPlugin("/nonexistent/libplugin.so");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("/nonexistent/libplugin.so"), std::string::npos);
}

}  // namespace
}  // namespace weft
