// No hangs in a pipeline: when a stage's process dies between steps, its
// neighbour fails in its next send or receive within the op timeout, and
// the error names the dead peer and the op.
#include <csignal>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "comm/testing/multiprocess.h"
#include "core/base/status_macros.h"
#include "gtest/gtest.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

TEST(PipelineFailureTest, NeighbourDeathFailsTheOtherStageNamingPeerAndOp) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(10);
  job.mutable_train()->set_micro_batch(2);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_pp(2);
  p->set_timeout_s(5);
  const auto results = comm::testing::RunRanks(
      comm::testing::RankMode::kProcesses, 2,
      [&](const comm::testing::RankContext& rc) -> absl::Status {
        const JobTopology topo = testing::RankTopology(rc);
        WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer,
                              testing::MakeGptTrainer(job, topo));
        for (int step = 1; step <= 10; ++step) {
          if (step == 3 && rc.rank == 1) ::raise(SIGKILL);  // the last stage dies
          WEFT_RETURN_IF_ERROR(trainer->TrainStep().status());
        }
        return absl::OkStatus();
      },
      {.deadline = absl::Seconds(60)});
  EXPECT_EQ(results[1].signal, SIGKILL);
  const absl::Status& s = results[0].status;
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(results[0].timed_out);
  EXPECT_LT(results[0].elapsed, absl::Seconds(5 + 10)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "peer rank 1")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "recv") || absl::StrContains(s.message(), "send"))
      << s;
  std::printf("rank 0 after %.1f s: %s\n", absl::ToDoubleSeconds(results[0].elapsed),
              s.ToString().c_str());
}

}  // namespace
}  // namespace weft
