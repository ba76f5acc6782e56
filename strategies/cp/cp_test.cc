// The cp strategy refuses to wrap a model whose step another strategy
// already owns (a pipeline split before cp): the pipeline would never feed
// its stages the rank's chunks. The composer's phase order prevents this;
// the error names what happened should a caller apply strategies itself.
#include "strategies/cp/cp.h"

#include <memory>
#include <string>

#include "core/parallel/parallel_state.h"
#include "core/parallel/step_schedule.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(ContextParallelStrategyTest, RefusesToApplyAfterAStepScheduleOwner) {
  ParallelState state;
  state.step_schedule = std::make_shared<GradAccumSchedule>();
  state.strategy_names = {"pp"};
  StrategyContext ctx;
  ctx.applied = &state;
  ContextParallelStrategy cp;
  const absl::Status s = cp.Apply(ctx).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  const std::string m(s.message());
  EXPECT_NE(m.find("applied after a strategy that owns the step schedule (applied so far: pp)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("cp applied before pipeline parallelism"), std::string::npos) << m;
  EXPECT_NE(m.find("ComposeStrategies"), std::string::npos) << m;
}

}  // namespace
}  // namespace weft
