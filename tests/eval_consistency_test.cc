// Validation loss is a function of the weights alone: every evaluation of a
// run sees the same samples (the validation loader restarts), and any number
// of data-parallel ranks with any micro-batch evaluate the same first N
// samples as one process (each rank its strided share, rows past N ignored).
// Before, each evaluation continued where the last one stopped, every rank
// took eval_batches batches of its own, and the set was counted in
// micro-batches, so the loss changed with the world size and micro-batch.
#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

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
  absl::StatusOr<double> first = (*trainer)->Evaluate(6);
  absl::StatusOr<double> second = (*trainer)->Evaluate(6);
  ASSERT_TRUE(first.ok() && second.ok()) << first.status() << second.status();
  EXPECT_EQ(*first, *second);
  // Training goes on from where it was, and the next evaluation sees the
  // same batches with the new weights.
  ASSERT_TRUE((*trainer)->TrainStep().ok());
  absl::StatusOr<double> after = (*trainer)->Evaluate(6);
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

// 7 samples: no layout below divides them, so every one but the reference
// ignores some rows of its last batch.
TEST(EvalConsistencyTest, AnyLayoutEvaluatesTheFirstSamples) {
  constexpr int64_t kSamples = 7;
  testing::RunOptions options;
  options.eval_samples = kSamples;
  // The reference: one process, batches of one sample, nothing ignored.
  GptJob reference_job = Job();
  reference_job.mutable_train()->set_micro_batch(1);
  absl::StatusOr<testing::ParityRun> reference = testing::RunSingleProcess(reference_job, options);
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_TRUE(reference->val_loss.has_value());
  struct Layout {
    int world;
    int micro_batch;
  };
  for (const Layout l : {Layout{1, 4}, Layout{2, 2}, Layout{2, 4}, Layout{4, 2}}) {
    GptJob job = Job();
    job.mutable_train()->set_micro_batch(l.micro_batch);
    absl::StatusOr<testing::ParityRun> run;
    if (l.world == 1) {
      run = testing::RunSingleProcess(job, options);
    } else {
      job.mutable_train()->mutable_parallel()->set_strategy("ddp");
      run = testing::RunMultiProcess(job, l.world, options);
    }
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_TRUE(run->val_loss.has_value());
    // The same weights (up to the order of f32 gradient sums) on the same
    // samples. Another set of samples differs by about 1e-3 here.
    EXPECT_NEAR(*run->val_loss, *reference->val_loss, 1e-5 * *reference->val_loss)
        << l.world << " ranks, micro-batch " << l.micro_batch;
  }
}

// A mixture of experts with a capacity drops choices by how rows are batched
// together; outside training every choice is kept, so the micro-batch (and
// the ignored rows padding the last batch) cannot move the validation loss.
TEST(EvalConsistencyTest, MoeCapacityDoesNotDependOnTheMicroBatch) {
  std::vector<double> losses;
  for (int micro : {1, 4}) {
    GptJob job = Job();
    job.mutable_model()->set_moe_every(1);
    job.mutable_model()->set_num_experts(4);
    job.mutable_model()->set_capacity_factor(1.0f);
    job.mutable_train()->set_micro_batch(micro);
    absl::StatusOr<std::unique_ptr<Trainer>> trainer =
        Trainer::Create(testing::GptTrainerOptions(job));
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    absl::StatusOr<double> v = (*trainer)->Evaluate(7);
    ASSERT_TRUE(v.ok()) << v.status();
    losses.push_back(*v);
  }
  EXPECT_NEAR(losses[0], losses[1], 1e-6 * losses[0]);
}

// eval_batches counts micro-batches of the configured size: a trainer's
// evaluation at micro-batch 2 covers eval_batches x 2 samples, and
// eval_samples overrides it.
TEST(EvalConsistencyTest, EvalBatchesCountConfiguredMicroBatches) {
  GptJob job = Job();
  job.mutable_train()->set_eval_batches(3);
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(testing::GptTrainerOptions(job));
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  EXPECT_EQ((*trainer)->EvalSamples(), 6);
  job.mutable_train()->set_eval_samples(5);
  trainer = Trainer::Create(testing::GptTrainerOptions(job));
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  EXPECT_EQ((*trainer)->EvalSamples(), 5);
  job.mutable_train()->set_eval_samples(-1);
  EXPECT_EQ(Trainer::Create(testing::GptTrainerOptions(job)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Periodic evaluations with no validation split are said at startup, not
// skipped without a word; a negative clipping norm is an error (it was
// taken as "off").
TEST(EvalConsistencyTest, RequestsThatCannotBeMetAreSaid) {
  GptJob job = Job();
  job.mutable_train()->mutable_data()->set_val_fraction(0);
  job.mutable_train()->set_eval_every(1);
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/noval.jsonl";
  job.mutable_train()->set_metrics_out(path);
  ASSERT_TRUE(Trainer::Create(testing::GptTrainerOptions(job)).ok());
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("no validation data: --eval_every=1 evaluates nothing"), std::string::npos)
      << text;
  job.mutable_train()->mutable_optim()->set_grad_clip(-1);
  EXPECT_EQ(Trainer::Create(testing::GptTrainerOptions(job)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace weft
