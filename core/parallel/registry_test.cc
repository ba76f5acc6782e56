#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/parallel/composer.h"
#include "core/parallel/strategy_registry.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

class Fake : public Strategy {
 public:
  Fake(std::string name, StrategyPhase phase, std::vector<std::string>* log,
       std::vector<std::string> axes = {})
      : name_(std::move(name)), phase_(phase), log_(log), axes_(std::move(axes)) {}
  std::string Name() const override { return name_; }
  StrategyPhase Phase() const override { return phase_; }
  std::vector<std::string> RequiredAxes() const override { return axes_; }
  OptionSchema Options() const override {
    OptionSchema s;
    s.Bool("fail_" + name_, false, "fail validation");
    return s;
  }
  absl::Status Validate(const StrategyOptionSet& o, const comm::MeshLayout*) const override {
    if (o.GetBool("fail_" + name_)) return absl::InvalidArgumentError("nope");
    return absl::OkStatus();
  }
  std::vector<std::string> After() const override { return after_; }
  absl::StatusOr<StrategyResult> Apply(StrategyContext&) override {
    log_->push_back(name_);
    StrategyResult r;
    r.notes.push_back("applied " + name_);
    return r;
  }
  std::vector<std::string> after_;

 private:
  std::string name_;
  StrategyPhase phase_;
  std::vector<std::string>* log_;
  std::vector<std::string> axes_;
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
WEFT_REGISTER_STRATEGY(fake_tp_axis, [] {
  return std::make_unique<Fake>("fake_tp_axis", StrategyPhase::kTensorParallel, &applied,
                                std::vector<std::string>{"tp"});
});

std::unique_ptr<Strategy> MakeFakeAfterTp() {
  auto s = std::make_unique<Fake>("fake_after_tp", StrategyPhase::kTensorParallel, &applied);
  s->after_ = {"fake_tp", "fake_tp_axis"};
  return s;
}
WEFT_REGISTER_STRATEGY(fake_after_tp, MakeFakeAfterTp);

TEST(ComposerTest, AfterMovesAStrategyBehindThoseItFollowsInItsPhase) {
  applied.clear();
  ParallelState state;
  StrategyContext ctx;
  ASSERT_TRUE(
      ComposeStrategies({"fake_dp", "fake_after_tp", "fake_tp"}, {}, ctx, state).ok());
  EXPECT_EQ(applied, (std::vector<std::string>{"fake_tp", "fake_after_tp", "fake_dp"}));
  // Without the strategies it follows, it keeps its place.
  applied.clear();
  ParallelState alone;
  ASSERT_TRUE(ComposeStrategies({"fake_dp", "fake_after_tp"}, {}, ctx, alone).ok());
  EXPECT_EQ(applied, (std::vector<std::string>{"fake_after_tp", "fake_dp"}));
}

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
  StrategyOptionValues options;
  StrategyContext ctx;
  ASSERT_TRUE(ComposeStrategies({"fake_dp", "fake_tp"}, options, ctx, state).ok());
  EXPECT_EQ(applied, (std::vector<std::string>{"fake_tp", "fake_dp"}));
  EXPECT_EQ(state.strategy_names, applied);
  // Each strategy's result is folded into the state, in order.
  EXPECT_EQ(state.notes, (std::vector<std::string>{"applied fake_tp", "applied fake_dp"}));

  applied.clear();
  options.given["fail_fake_dp"] = "true";
  absl::Status s = ComposeStrategies({"fake_tp", "fake_dp"}, options, ctx, state);
  EXPECT_NE(s.message().find("strategy 'fake_dp': nope"), std::string::npos);
  EXPECT_TRUE(applied.empty());  // nothing applied when any validation fails
}

TEST(ComposerTest, TwoDataParallelStrategiesOrDuplicatesAreRejected) {
  StrategyOptionValues options;
  // The registered data-parallel strategies are listed (plugins' too), and
  // the hint is the strategies' own (fsdp's names HSDP; these have none).
  const absl::Status s = ValidateStrategies({"fake_dp", "fake_dp2"}, options, nullptr);
  EXPECT_NE(s.message().find("at most one data-parallel strategy (fake_dp, fake_dp2)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("keep one of them in --strategy"), std::string::npos) << s;
  EXPECT_NE(ValidateStrategies({"fake_tp", "fake_tp"}, options, nullptr).message().find("twice"),
            std::string::npos);
}

TEST(ComposerTest, UnknownOptionNamesTheValidOnesAndTheirOwner) {
  StrategyOptionValues options;
  options.given["fail_fake_dp2"] = "true";
  absl::Status s = ValidateStrategies({"fake_tp", "fake_dp"}, options, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("unknown strategy option 'fail_fake_dp2'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("fake_tp: fail_fake_tp; fake_dp: fail_fake_dp"), std::string::npos)
      << s;
  EXPECT_NE(s.message().find("belongs to fake_dp2, which is not in --strategy"),
            std::string::npos)
      << s;
  options.given = {{"fail_fake_dp", "maybe"}};
  s = ValidateStrategies({"fake_dp"}, options, nullptr);
  EXPECT_NE(s.message().find("a value of type bool"), std::string::npos) << s;
}

TEST(ComposerTest, QualifiedKeysAndFlagValues) {
  StrategyOptionValues options;
  options.from_flags["fail_fake_dp"] = "true";    // a flag
  options.given["fake_dp.fail_fake_dp"] = "false";  // --strategy_options wins
  EXPECT_TRUE(ValidateStrategies({"fake_dp"}, options, nullptr).ok());
  options.given.clear();
  EXPECT_FALSE(ValidateStrategies({"fake_dp"}, options, nullptr).ok());
  // A flag no applied strategy declares is not an error, but it is noted.
  options.from_flags = {{"zero_stage", "2"}};
  EXPECT_TRUE(ValidateStrategies({"fake_dp"}, options, nullptr).ok());
  std::vector<std::string> notes = UnreadFlagNotes({"fake_dp"}, options);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "--zero_stage=2 is read by no applied strategy (fake_dp) and changes nothing");
  options.from_flags = {{"fail_fake_dp", "true"}};
  EXPECT_TRUE(UnreadFlagNotes({"fake_dp"}, options).empty());
  options.given = {{"zero_stage", "3"}};  // --strategy_options without a strategy
  notes = UnreadFlagNotes({}, options);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0],
            "--strategy_options zero_stage=3 is read by no applied strategy (none) and changes "
            "nothing");
  notes.erase(notes.begin());
  EXPECT_NE(notes[0].find("(none) and changes nothing; it is an option of fake_dp"),
            std::string::npos)
      << notes[0];
}

TEST(ComposerTest, RequiredAxesAndUnusedAxes) {
  StrategyOptionValues options;
  auto mesh = *comm::MeshLayout::Create({{"dp_shard", 2}, {"tp", 2}}, 4);
  absl::Status s = ValidateStrategies({"fake_dp"}, options, &mesh);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("no strategy uses mesh axis dp_shard of size 2"), std::string::npos)
      << s;
  EXPECT_NE(s.message().find("set --dp_shard=1"), std::string::npos) << s;
  auto one = *comm::MeshLayout::Create({{"dp_shard", 1}}, 1);
  EXPECT_TRUE(ValidateStrategies({"fake_dp"}, options, &one).ok());
}

// `auto` reaching a program that does not run the memory planner (the
// MLP trainer) says so instead of listing the registered strategies.
TEST(ComposerTest, AutoWithoutThePlannerIsExplained) {
  absl::StatusOr<std::vector<std::string>> names = ParseStrategyList("auto");
  ASSERT_FALSE(names.ok());
  EXPECT_EQ(names.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(names.status().message().find("memory planner"), std::string::npos)
      << names.status();
  EXPECT_NE(names.status().message().find("//models/gpt:train"), std::string::npos)
      << names.status();
  EXPECT_TRUE(ParseStrategyList("ddp, recompute").ok());
}

// --strategy=tp on 2 ranks without --tp=2: the ranks sit on dp_shard, and
// the hint names the axis the chosen strategy works on.
TEST(ComposerTest, UnusedAxisHintNamesTheChosenStrategysIdleAxis) {
  StrategyOptionValues options;
  auto mesh = *comm::MeshLayout::Create({{"dp_shard", 2}, {"tp", 1}}, 2);
  absl::Status s = ValidateStrategies({"fake_tp_axis"}, options, &mesh);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("no strategy uses mesh axis dp_shard of size 2"), std::string::npos)
      << s;
  EXPECT_NE(s.message().find("e.g. --tp=2 (tp has size 1)"), std::string::npos) << s;
  // Without an idle axis the hint stays as it was.
  auto both = *comm::MeshLayout::Create({{"dp_shard", 2}, {"tp", 2}}, 4);
  s = ValidateStrategies({"fake_tp_axis"}, options, &both);
  EXPECT_NE(s.message().find("set --dp_shard=1"), std::string::npos) << s;
  EXPECT_EQ(s.message().find("e.g. --"), std::string::npos) << s;
}

TEST(ComposerTest, DescribeListsOptions) {
  const std::string d = DescribeRegisteredStrategies();
  EXPECT_NE(d.find("fake_dp\n    fail_fake_dp (bool, default 'false'): fail validation"),
            std::string::npos)
      << d;
}

TEST(ComposerTest, ParseStrategyList) {
  EXPECT_EQ(*ParseStrategyList(" ddp , fsdp"), (std::vector<std::string>{"ddp", "fsdp"}));
  EXPECT_TRUE(ParseStrategyList("")->empty());
  EXPECT_FALSE(ParseStrategyList("ddp,,fsdp").ok());
}

std::string TestPlugin(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/weft/core/parallel/", name);
}

// A plugin compiled against another weft would read ParallelState and the
// others at other offsets: refused at load, and none of its strategies stays.
TEST(PluginTest, APluginOfAnotherAbiIsRefusedAndUnregistered) {
  absl::Status s = LoadStrategyPlugin(TestPlugin("libold_abi_test_plugin.so"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find(absl::StrCat("built against another weft: old_abi_test (ABI 0); "
                                          "this binary has plugin ABI ",
                                          kStrategyAbiVersion)),
            std::string::npos)
      << s;
  const std::vector<std::string> names = RegisteredStrategies();
  EXPECT_EQ(std::find(names.begin(), names.end(), "old_abi_test"), names.end());
}

TEST(PluginTest, AnUndefinedWeftSymbolIsNamedInCpp) {
  absl::Status s = LoadStrategyPlugin(TestPlugin("libmissing_symbol_test_plugin.so"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("(weft::FunctionThisBinaryLacks(int))"), std::string::npos) << s;
  EXPECT_NE(s.message().find("rebuild the plugin against this weft"), std::string::npos) << s;
}

TEST(PluginTest, MissingLibraryIsAClearError) {
  absl::Status s = LoadStrategyPlugin("/nonexistent/libplugin.so");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("/nonexistent/libplugin.so"), std::string::npos);
}

}  // namespace
}  // namespace weft
