// Validation loss is a function of the weights alone: every evaluation of a
// run sees the same batches (the validation loader restarts), and 1, 2 or 4
// data-parallel ranks evaluate the same sequences as one process (each rank
// its strided share of the first eval_batches micro-batches). Before, each
// evaluation continued where the last one stopped, and every rank took
// eval_batches batches of its own, so the loss changed with the world size.
#include <cmath>
#include <string>

#include "core/runtime/trainer.h"
#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

GptJob Job() {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(2);
  job.mutable_train()->set_micro_batch(2);  // global batch 8 at every world size
  return job;
}

TEST(EvalConsistencyTest, EveryEvaluationSeesTheSameBatches) {
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(testing::GptTrainerOptions(Job()));
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->TrainStep().ok());
  absl::StatusOr<double> first = (*trainer)->Evaluate(3);
  absl::StatusOr<double> second = (*trainer)->Evaluate(3);
  ASSERT_TRUE(first.ok() && second.ok()) << first.status() << second.status();
  EXPECT_EQ(*first, *second);
  // Training goes on from where it was, and the next evaluation sees the
  // same batches with the new weights.
  ASSERT_TRUE((*trainer)->TrainStep().ok());
  absl::StatusOr<double> after = (*trainer)->Evaluate(3);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_NE(*after, *first);
}

// An evaluation over no batches is refused (it used to log val_loss NaN,
// shown as "-", at the end of every --eval_batches=0 run, which now skips
// evaluating).
TEST(EvalConsistencyTest, NoBatchesIsAnErrorNotANaN) {
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(testing::GptTrainerOptions(Job()));
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  EXPECT_EQ((*trainer)->Evaluate(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(EvalConsistencyTest, DataParallelRanksEvaluateTheOneProcessBatches) {
  const GptJob job = Job();
  testing::RunOptions options;
  options.eval_batches = 4;
  absl::StatusOr<testing::ParityRun> single = testing::RunSingleProcess(job, options);
  ASSERT_TRUE(single.ok()) << single.status();
  ASSERT_TRUE(single->val_loss.has_value());
  for (int world : {2, 4}) {
    GptJob multi_job = job;
    multi_job.mutable_train()->mutable_parallel()->set_strategy("ddp");
    absl::StatusOr<testing::ParityRun> multi = testing::RunMultiProcess(multi_job, world, options);
    ASSERT_TRUE(multi.ok()) << multi.status();
    ASSERT_TRUE(multi->val_loss.has_value());
    // The same weights (ddp is f32-exact up to summation order) on the same
    // sequences: equal up to the order of the loss sums.
    EXPECT_NEAR(*multi->val_loss, *single->val_loss, 1e-5 * *single->val_loss)
        << world << " ranks";
  }
}

}  // namespace
}  // namespace weft
