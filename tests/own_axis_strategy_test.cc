// A strategy with a mesh axis of its own, added the way a user adds one:
// this file alone declares it (its axis "mirror", that it follows tp, and
// its step participant), and --mesh_axes sizes the axis. The plan must put
// the axis on the mesh, apply the strategy after tp although --strategy
// lists it first, and training on mirror x tp ranks must match one process.
//
// The mirror ranks read the same samples (an axis of a strategy's own
// does not split the data), so averaging the gradients over them keeps
// them exactly: the test checks the plumbing, not a new kind of math.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/process_group/process_group.h"
#include "core/base/status_macros.h"
#include "core/parallel/composer.h"
#include "core/parallel/parallel_plan.h"
#include "core/parallel/strategy.h"
#include "core/parallel/strategy_registry.h"
#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

class MirrorParticipant : public StepParticipant {
 public:
  MirrorParticipant(std::shared_ptr<comm::ProcessGroup> group, std::vector<Parameter*> params,
                    NativeStream stream)
      : group_(std::move(group)), params_(std::move(params)), stream_(stream) {}

  absl::Status FinishGradients() override {
    for (Parameter* p : params_) {
      WEFT_RETURN_IF_ERROR(
          group_->AllReduce(p->grad, {.op = comm::ReduceOp::kAvg, .stream = stream_})->Wait());
    }
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<comm::ProcessGroup> group_;
  std::vector<Parameter*> params_;
  NativeStream stream_;
};

class MirrorStrategy : public Strategy {
 public:
  std::string Name() const override { return "mirror"; }
  StrategyPhase Phase() const override { return StrategyPhase::kTensorParallel; }
  std::vector<std::string> RequiredAxes() const override { return {"mirror"}; }
  std::vector<std::string> After() const override { return {"tp"}; }
  absl::Status Validate(const StrategyOptionSet&, const comm::MeshLayout*) const override {
    return absl::OkStatus();
  }
  absl::StatusOr<StrategyResult> Apply(StrategyContext& ctx) override {
    StrategyResult result;
    WEFT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> group, ctx.mesh->Group("mirror"));
    WEFT_ASSIGN_OR_RETURN(std::vector<int> ranks, ctx.mesh->GroupRanks("mirror"));
    // Says where it was applied, for the test to read in the notes.
    result.notes.push_back(absl::StrCat("mirror over ranks ", absl::StrJoin(ranks, ","),
                                        " applied after: ",
                                        absl::StrJoin(ctx.applied->strategy_names, ",")));
    result.participants.push_back(std::make_unique<MirrorParticipant>(
        group, ctx.model().Parameters(), ctx.run->stream));
    result.keep_alive.push_back(group);
    // The mirror ranks hold identical copies: checkpoints write copy 0.
    WEFT_ASSIGN_OR_RETURN(result.replica_copies, ctx.mesh->AxisSize("mirror"));
    WEFT_ASSIGN_OR_RETURN(result.replica_copy, ctx.mesh->Coordinate("mirror"));
    return result;
  }
};

WEFT_REGISTER_STRATEGY(mirror, [] { return std::make_unique<MirrorStrategy>(); });

PlanRequest Request(const std::string& strategy, int world, std::map<std::string, int> own) {
  PlanRequest r;
  r.strategy = strategy;
  r.mesh.tp = 2;
  r.own_axes = std::move(own);
  r.world_size = world;
  r.description = absl::StrCat(world, " test ranks");
  return r;
}

TEST(OwnAxisStrategyTest, PlanPutsTheAxisOutermostAndAppliesItAfterTp) {
  absl::StatusOr<ParallelPlan> plan = ParallelPlan::Resolve(Request("mirror,tp", 4, {{"mirror", 2}}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->strategies(), (std::vector<std::string>{"tp", "mirror"}));
  ASSERT_NE(plan->mesh(), nullptr);
  EXPECT_EQ(plan->mesh()->layout().axes().front().name, "mirror");
  EXPECT_EQ(plan->mesh()->size("mirror"), 2);
  EXPECT_EQ(plan->mesh()->size("tp"), 2);
  EXPECT_EQ(plan->mesh()->size("dp_shard"), 1);
  // Ranks of one mirror group read the same samples.
  EXPECT_EQ(plan->mesh()->DataParallelSize(), 1);
}

TEST(OwnAxisStrategyTest, AxisSizesAreCheckedAgainstTheStrategies) {
  // An axis no applied strategy declares.
  absl::StatusOr<ParallelPlan> plan = ParallelPlan::Resolve(Request("tp", 4, {{"mirror", 2}}));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition) << plan.status();
  EXPECT_NE(plan.status().message().find("mirror"), std::string::npos) << plan.status();
  // A training mesh axis given as a strategy's own.
  plan = ParallelPlan::Resolve(Request("mirror,tp", 4, {{"tp", 2}}));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
  EXPECT_NE(plan.status().message().find("--tp=2"), std::string::npos) << plan.status();
  // The product of the axes must be the world.
  plan = ParallelPlan::Resolve(Request("mirror,tp", 8, {{"mirror", 3}}));
  EXPECT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("mirror=3"), std::string::npos) << plan.status();
  EXPECT_FALSE(ParseMeshAxes("mirror").ok());
  EXPECT_FALSE(ParseMeshAxes("mirror=0").ok());
  EXPECT_FALSE(ParseMeshAxes("mirror=2,mirror=2").ok());
  EXPECT_EQ(ParseMeshAxes(" mirror=2 , b=3")->at("b"), 3);
}

TEST(OwnAxisStrategyTest, MirrorTimesTpTrainsLikeOneProcess) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(8);
  absl::StatusOr<testing::ParityRun> single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy("mirror,tp");
  p->set_tp(2);
  p->set_mesh_axes("mirror=2");
  absl::StatusOr<testing::ParityRun> run = testing::RunMultiProcess(job, 4);
  ASSERT_TRUE(run.ok()) << run.status();
  // Rank 0's mirror group is ranks 0 and 2 (mirror is outermost, tp=2
  // inside it), and tp was applied before it.
  EXPECT_NE(std::find(run->notes.begin(), run->notes.end(),
                      "mirror over ranks 0,2 applied after: tp"),
            run->notes.end())
      << absl::StrJoin(run->notes, "\n");
  // tp's tolerances (parity_tp_test): only the f32 summation order differs.
  testing::ExpectParity(*single, *run, 1e-4, 1e-3, "mirror x tp");
}

}  // namespace
}  // namespace weft
