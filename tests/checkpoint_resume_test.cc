// Checkpoints in training: 2N steps straight equal N steps, save, new
// processes, resume, N steps -- bitwise, for every data-parallel strategy;
// a checkpoint reshards through a chain of world sizes and strategies with
// the full state unchanged, exactly; and resuming under another mesh
// (fsdp to zero, tp to one process and back, ep2 x tp2 to one process)
// matches within the parity tolerance.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "checkpoint/layout.h"
#include "checkpoint/loader.h"
#include "core/runtime/trainer.h"
#include "data/data.h"
#include "gtest/gtest.h"
#include "models/gpt/gpt_job.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

std::string FreshDir(const std::string& name) {
  const std::string d = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  fs::remove_all(d);
  return d;
}

GptJob BaseJob() {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(12);
  // Dropout on: its masks must resume exactly too.
  job.mutable_model()->set_dropout(0.1f);
  job.mutable_train()->set_eval_every(0);
  return job;
}

struct ResumeCase {
  std::string label;
  std::string strategy;
  int zero_stage = 1;
  int world = 1;
  int pp = 1;
};

absl::StatusOr<testing::ParityRun> RunJob(const GptJob& job, int world, const testing::RunOptions& o) {
  return world == 1 ? testing::RunSingleProcess(job, o) : testing::RunMultiProcess(job, world, o);
}

void ExpectBitwise(const testing::ParityRun& a, const testing::ParityRun& b, const std::string& label) {
  ASSERT_EQ(a.losses.size(), b.losses.size()) << label;
  for (size_t i = 0; i < a.losses.size(); ++i) EXPECT_EQ(a.losses[i], b.losses[i]) << label << " step " << i + 1;
  EXPECT_EQ(a.params, b.params) << label << ": parameters differ";
  EXPECT_EQ(a.optim, b.optim) << label << ": optimizer state differs";
  EXPECT_FALSE(a.params.empty());
  EXPECT_FALSE(a.optim.empty());
}

// A resumed run as one: the first part's losses, then the second's (whose
// parameters and state are the end's).
testing::ParityRun Joined(const testing::ParityRun& first, const testing::ParityRun& second) {
  testing::ParityRun joined = second;
  joined.losses.insert(joined.losses.begin(), first.losses.begin(), first.losses.end());
  return joined;
}

class BitwiseResumeTest : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(BitwiseResumeTest, NStepsSaveResumeNStepsEqualsTwoNStraight) {
  const ResumeCase& s = GetParam();
  GptJob job = BaseJob();
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy(s.strategy);
  p->set_zero_stage(s.zero_stage);
  p->set_bucket_mb(0.02);
  p->set_pp(s.pp);
  job.mutable_train()->set_micro_batch(s.world == 1 ? 4 : 8 / s.world / 2);  // 2 accumulation steps
  auto straight = RunJob(job, s.world, {});
  ASSERT_TRUE(straight.ok()) << straight.status();

  const std::string dir = FreshDir("resume_" + s.label);
  job.mutable_train()->set_checkpoint_dir(dir);
  auto first = RunJob(job, s.world, {.steps = 6, .save_at_end = true});
  ASSERT_TRUE(first.ok()) << first.status();
  job.mutable_train()->set_resume("latest");
  auto second = RunJob(job, s.world, {});
  ASSERT_TRUE(second.ok()) << second.status();
  const testing::ParityRun joined = Joined(*first, *second);
  ExpectBitwise(*straight, joined, s.label);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, BitwiseResumeTest,
    ::testing::Values(ResumeCase{"plain", "", 1, 1}, ResumeCase{"ddp", "ddp", 1, 2},
                      ResumeCase{"zero1", "zero", 1, 2}, ResumeCase{"zero2", "zero", 2, 2},
                      ResumeCase{"zero3", "zero", 3, 2}, ResumeCase{"fsdp", "fsdp", 1, 2},
                      ResumeCase{"pp2", "", 1, 2, 2}, ResumeCase{"pp2_fsdp2", "fsdp", 1, 4, 2}),
    [](const ::testing::TestParamInfo<ResumeCase>& i) { return i.param.label; });

// Periodic async saves during Trainer::Run on 2 gloo ranks: the writes and
// the store traffic of the background threads run while the ranks keep
// training (and all-reducing); keep_last prunes; the step-6 checkpoint
// resumes to the straight run's end state, bitwise.
TEST(AsyncCheckpointTest, PeriodicAsyncSavesDuringTrainingResumeBitwise) {
  GptJob job = BaseJob();
  job.mutable_train()->set_steps(8);
  job.mutable_train()->set_micro_batch(2);
  job.mutable_train()->mutable_parallel()->set_strategy("ddp");
  auto straight = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(straight.ok()) << straight.status();
  const std::string dir = FreshDir("async_periodic");
  job.mutable_train()->set_checkpoint_dir(dir);
  job.mutable_train()->set_checkpoint_every(2);
  job.mutable_train()->set_checkpoint_async(true);
  job.mutable_train()->set_keep_last(2);
  auto saving = testing::RunMultiProcess(job, 2, {.use_run = true});
  ASSERT_TRUE(saving.ok()) << saving.status();
  EXPECT_EQ(saving->params, straight->params);
  auto all = ckpt::ListCheckpoints(dir);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].step, 6);
  EXPECT_EQ((*all)[1].step, 8);
  for (const auto& c : *all) {
    auto ck = ckpt::OpenCheckpoint(c.path);
    ASSERT_TRUE(ck.ok()) << ck.status();
    EXPECT_TRUE(ckpt::VerifyChecksums(*ck, nullptr).ok());
  }
  job.mutable_train()->set_checkpoint_dir(FreshDir("async_periodic_resumed"));
  job.mutable_train()->set_checkpoint_every(0);
  job.mutable_train()->set_checkpoint_async(false);
  job.mutable_train()->set_keep_last(0);
  job.mutable_train()->set_resume(dir + "/step_6");
  auto resumed = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->losses.size(), 2u);
  EXPECT_EQ(resumed->losses[0], straight->losses[6]);
  EXPECT_EQ(resumed->losses[1], straight->losses[7]);
  EXPECT_EQ(resumed->params, straight->params);
  EXPECT_EQ(resumed->optim, straight->optim);
}

// --checkpoint_dir without --checkpoint_every still saves the end state (a
// 124M run on the GPU once trained 200 steps and left nothing to sample).
TEST(EndOfRunCheckpointTest, ADirectoryWithoutAPeriodGetsTheLastStep) {
  GptJob job = BaseJob();
  job.mutable_train()->set_steps(3);
  const std::string dir = FreshDir("end_of_run");
  job.mutable_train()->set_checkpoint_dir(dir);
  auto run = testing::RunSingleProcess(job, {.use_run = true});
  ASSERT_TRUE(run.ok()) << run.status();
  auto all = ckpt::ListCheckpoints(dir);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].step, 3);
}

// A run that would save beside checkpoints past its start is refused before
// it trains: a rewind into its own directory (it trained to the end, then
// failed on the first step it shared with the old run, losing the final
// checkpoint) and a new run into a used directory.
TEST(CheckpointDirTest, StepsPastTheStartAreRefusedBeforeTraining) {
  GptJob job = BaseJob();
  job.mutable_train()->set_steps(6);
  const std::string dir = FreshDir("rewind");
  job.mutable_train()->set_checkpoint_dir(dir);
  job.mutable_train()->set_checkpoint_every(2);
  auto run = testing::RunSingleProcess(job, {.use_run = true});
  ASSERT_TRUE(run.ok()) << run.status();

  GptJob rewind = job;
  rewind.mutable_train()->set_resume(dir + "/step_2");
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(testing::GptTrainerOptions(rewind));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(t.status().message().find("holds step_4, step_6, past where this run starts: step 2"),
            std::string::npos)
      << t.status();
  GptJob again = job;  // the same command a second time, without --resume
  t = Trainer::Create(testing::GptTrainerOptions(again));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(t.status().message().find("--resume=latest"), std::string::npos) << t.status();
  // Continuing from the newest is what the directory is for.
  GptJob latest = job;
  latest.mutable_train()->set_resume("latest");
  t = Trainer::Create(testing::GptTrainerOptions(latest));
  EXPECT_TRUE(t.ok()) << t.status();
}

// Trainer options with //models/gpt:train's job, which records the data's
// tokenizer in checkpoints.
Trainer::Options WithTokenizer(const GptJob& job) {
  Trainer::Options o = testing::GptTrainerOptions(job);
  o.job = std::make_shared<GptTrainJob>(job, job.train().data().data());
  return o;
}

// A resume on data that tokenizes differently is refused: here one letter of
// the corpus is replaced by one it lacked, so the text, the windows and the
// vocabulary keep their sizes, but the ids of the letters between the two
// shift by one and would train embedding rows that meant other letters.
TEST(ResumeTokenizerTest, DataThatTokenizesDifferentlyIsRefused) {
  GptJob job = BaseJob();
  job.mutable_train()->set_steps(2);
  const std::string dir = FreshDir("resume_tokenizer");
  job.mutable_train()->set_checkpoint_dir(dir);
  {
    absl::StatusOr<std::unique_ptr<Trainer>> first = Trainer::Create(WithTokenizer(job));
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_TRUE((*first)->Run().ok());
  }
  GptJob resumed = job;
  resumed.mutable_train()->set_steps(4);
  resumed.mutable_train()->set_resume("latest");
  {
    absl::StatusOr<std::unique_ptr<Trainer>> same = Trainer::Create(WithTokenizer(resumed));
    EXPECT_TRUE(same.ok()) << same.status();
  }
  std::stringstream text;
  text << std::ifstream(job.train().data().data()).rdbuf();
  std::string edited = text.str();
  ASSERT_EQ(edited.find('X'), std::string::npos);
  std::replace(edited.begin(), edited.end(), 'q', 'X');
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/edited_corpus.txt");
  std::ofstream(path) << edited;
  resumed.mutable_train()->mutable_data()->set_data(path);
  absl::StatusOr<std::unique_ptr<Trainer>> other = Trainer::Create(WithTokenizer(resumed));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("was trained with another tokenizer"), std::string::npos)
      << other.status();
}

// Each hop loads the previous hop's checkpoint under a new world size and
// strategy mix and saves it again without training; the full state
// reassembled from every hop equals the first one's exactly.
TEST(ReshardChainTest, FsdpFourToHsdpToSingleToPipelinesToZeroTwoOnThreeToDdpTwo) {
  GptJob job = BaseJob();
  job.mutable_train()->set_global_batch(12);
  job.mutable_train()->set_micro_batch(1);
  struct Hop {
    std::string label, strategy;
    int world, zero_stage = 1, dp_replicate = 1, pp = 1;
  };
  const std::vector<Hop> hops = {{"fsdp@4", "fsdp", 4},
                                 {"hsdp 2x2@4", "fsdp", 4, 1, 2},
                                 {"single", "", 1},
                                 {"pp2 x fsdp2@4", "fsdp", 4, 1, 1, 2},
                                 {"pp4@4", "pp", 4, 1, 1, 4},
                                 {"zero-2@3", "zero", 3, 2},
                                 {"ddp@2", "ddp", 2}};
  std::map<std::string, ckpt::HostTensor> first;
  std::string previous;
  for (size_t h = 0; h < hops.size(); ++h) {
    const Hop& hop = hops[h];
    ParallelConfig* p = job.mutable_train()->mutable_parallel();
    p->set_strategy(hop.strategy);
    p->set_zero_stage(hop.zero_stage);
    p->set_dp_replicate(hop.dp_replicate);
    p->set_dp_shard(0);
    p->set_pp(hop.pp);
    const std::string dir = FreshDir(absl::StrCat("chain_", h));
    job.mutable_train()->set_checkpoint_dir(dir);
    job.mutable_train()->set_resume(previous);
    // The first hop trains 3 steps so moments are non-trivial; the others
    // only load and save.
    auto run = RunJob(job, hop.world, {.steps = h == 0 ? 3 : 0, .save_at_end = true});
    ASSERT_TRUE(run.ok()) << hop.label << ": " << run.status();
    previous = dir + "/step_3";
    auto ck = ckpt::OpenCheckpoint(previous);
    ASSERT_TRUE(ck.ok()) << ck.status();
    EXPECT_EQ(ck->meta.world_size(), hop.world) << hop.label;
    EXPECT_EQ(ck->meta.strategies().find(hop.strategy) != std::string::npos, true) << hop.label;
    auto full = ckpt::ReadFullTensors(*ck, nullptr);
    ASSERT_TRUE(full.ok()) << full.status();
    if (h == 0) {
      first = *full;
      EXPECT_GT(first.size(), 10u);
      continue;
    }
    ASSERT_EQ(full->size(), first.size()) << hop.label;
    for (const auto& [name, t] : first) {
      ASSERT_EQ(full->at(name).shape, t.shape) << hop.label << " " << name;
      EXPECT_EQ(full->at(name).values, t.values) << hop.label << ": " << name << " changed";
    }
  }
}

// A checkpoint taken after an evaluation reshards like any other: every
// evaluation restarts the validation loader, so its saved position is not
// restored. It was, and checked against the new layout: 3 evaluated batches
// of 2 in one process (6 samples) refused 2 ranks of 4 ("a loader position
// of 6 samples ... expected a multiple of ... 8").
TEST(ReshardedResumeTest, AnEvaluationBeforeTheSaveDoesNotPinTheLayout) {
  GptJob job = BaseJob();
  job.mutable_model()->set_dropout(0.0f);
  job.mutable_train()->set_micro_batch(2);
  auto straight = testing::RunSingleProcess(job);
  ASSERT_TRUE(straight.ok()) << straight.status();
  const std::string dir = FreshDir("evaluated_resume");
  job.mutable_train()->set_checkpoint_dir(dir);
  auto first =
      testing::RunSingleProcess(job, {.steps = 6, .save_at_end = true, .eval_batches = 3});
  ASSERT_TRUE(first.ok()) << first.status();
  job.mutable_train()->mutable_parallel()->set_strategy("ddp");
  job.mutable_train()->set_micro_batch(4);
  job.mutable_train()->set_resume("latest");
  auto second = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(second.ok()) << second.status();
  const testing::ParityRun joined = Joined(*first, *second);
  testing::ExpectParity(*straight, joined, 1e-4, 1e-3, "one process, evaluated -> ddp@2");
}

// --eval_samples unset means eval_batches x micro_batch: a resume under
// another micro_batch keeps the checkpoint's count, so it evaluates the
// same validation samples (the val_loss curve jumped, 2.600 -> 2.517).
TEST(ResumedEvaluationTest, AnotherMicroBatchEvaluatesTheSameSamples) {
  GptJob job = BaseJob();
  job.mutable_model()->set_dropout(0.0f);
  job.mutable_train()->set_steps(2);
  job.mutable_train()->set_micro_batch(4);
  job.mutable_train()->set_eval_batches(3);
  const std::string dir = FreshDir("eval_count");
  job.mutable_train()->set_checkpoint_dir(dir);
  double before = 0;
  {
    auto first = testing::MakeGptTrainer(job);
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_TRUE((*first)->Run().ok());
    ASSERT_EQ((*first)->EvalSamples(), 12);
    auto v = (*first)->Evaluate(12);
    ASSERT_TRUE(v.ok()) << v.status();
    before = *v;
  }
  job.mutable_train()->set_micro_batch(2);
  job.mutable_train()->set_resume("latest");
  {
    auto second = testing::MakeGptTrainer(job);
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ((*second)->EvalSamples(), 12) << "not 3 batches of the new micro_batch 2";
    auto v = (*second)->Evaluate((*second)->EvalSamples());
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_NEAR(*v, before, 1e-5 * before);
  }
  job.mutable_train()->set_eval_samples(5);  // given: it wins
  auto third = testing::MakeGptTrainer(job);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ((*third)->EvalSamples(), 5);
}

// Resuming under another mesh continues the same run: the math differs
// from the straight run only in f32 summation order.
TEST(ReshardedResumeTest, FsdpFourThenZeroTwoOnTwoMatchesTheStraightRun) {
  GptJob job = BaseJob();
  job.mutable_model()->set_dropout(0.0f);  // masks are keyed by dp rank
  auto straight = testing::RunSingleProcess(job);
  ASSERT_TRUE(straight.ok()) << straight.status();
  const std::string dir = FreshDir("resharded_resume");
  job.mutable_train()->set_checkpoint_dir(dir);
  ParallelConfig* p = job.mutable_train()->mutable_parallel();
  p->set_strategy("fsdp");
  job.mutable_train()->set_micro_batch(2);
  auto first = testing::RunMultiProcess(job, 4, {.steps = 6, .save_at_end = true});
  ASSERT_TRUE(first.ok()) << first.status();
  p->set_strategy("zero");
  p->set_zero_stage(2);
  job.mutable_train()->set_micro_batch(4);
  job.mutable_train()->set_resume("latest");
  auto second = testing::RunMultiProcess(job, 2);
  ASSERT_TRUE(second.ok()) << second.status();
  const testing::ParityRun joined = Joined(*first, *second);
  testing::ExpectParity(*straight, joined, 1e-4, 1e-3, "fsdp@4 -> zero-2@2");
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

// A tensor-parallel checkpoint exports each rank's slices with their global
// offsets, so one process resumes it (and the run continues as if it had
// never been split). With a vocabulary tp does not divide (41 rows,
// vocab_pad_multiple 1, over tp=2: 21 rows per rank, one of them padding)
// the checkpoint holds the model's 41 rows, so it moves both ways.
absl::StatusOr<testing::ParityRun> RunTp(GptJob job, int tp, const testing::RunOptions& o) {
  if (tp == 1) return testing::RunSingleProcess(job, o);
  job.mutable_train()->mutable_parallel()->set_strategy("tp");
  job.mutable_train()->mutable_parallel()->set_tp(tp);
  return testing::RunMultiProcess(job, tp, o);
}

TEST(ReshardedResumeTest, TpTwoThenOneProcessMatchesTheStraightRun) {
  struct Case {
    int pad_multiple, first_tp, second_tp;
  };
  for (const Case& k : {Case{8, 2, 1}, Case{1, 2, 1}, Case{1, 1, 2}}) {
    GptJob job = BaseJob();  // dropout on: tp masks are slices of one process's
    job.mutable_model()->set_vocab_pad_multiple(k.pad_multiple);
    const std::string label = absl::StrCat("tp@", k.first_tp, " -> tp@", k.second_tp,
                                           ", vocab_pad_multiple ", k.pad_multiple);
    auto straight = testing::RunSingleProcess(job);
    ASSERT_TRUE(straight.ok()) << straight.status();
    job.mutable_train()->set_checkpoint_dir(
        FreshDir(absl::StrCat("tp_resume_", k.pad_multiple, "_", k.first_tp)));
    auto first = RunTp(job, k.first_tp, {.steps = 6, .save_at_end = true});
    ASSERT_TRUE(first.ok()) << label << ": " << first.status();
    job.mutable_train()->set_resume("latest");
    auto second = RunTp(job, k.second_tp, {});
    ASSERT_TRUE(second.ok()) << label << ": " << second.status();
    EXPECT_EQ(second->params.at("embed.wte").size(), straight->params.at("embed.wte").size());
    const testing::ParityRun joined = Joined(*first, *second);
    testing::ExpectParity(*straight, joined, 1e-4, 1e-3, label);
    std::printf("%s: max param diff %.2e\n", label.c_str(),
                testing::MaxRelativeDifference(joined.params, straight->params));
  }
}

// ep2 x tp2 on 4 ranks saves whole experts split over ep, their hidden units
// split over tp, and the dense weights split over tp; one process resumes
// it. Dropout off: masks are keyed by the data-parallel rank. The reference
// routes its batch as the 2 groups the data-parallel ranks get
// (moe_routing_groups), before and after the resume.
TEST(ReshardedResumeTest, Ep2Tp2ThenOneProcessMatchesTheStraightRun) {
  GptJob job = BaseJob();
  GptConfig* m = job.mutable_model();
  m->set_dropout(0.0f);
  m->set_n_head(4);
  m->set_moe_every(1);
  m->set_num_experts(4);
  m->set_top_k(2);
  m->set_moe_routing_groups(2);
  auto straight = testing::RunSingleProcess(job);
  ASSERT_TRUE(straight.ok()) << straight.status();
  job.mutable_train()->set_checkpoint_dir(FreshDir("ep_tp_resume"));
  GptJob split = job;
  split.mutable_model()->set_moe_routing_groups(1);
  split.mutable_train()->set_micro_batch(4);
  ParallelConfig* p = split.mutable_train()->mutable_parallel();
  p->set_strategy("tp");
  p->set_tp(2);
  p->set_ep(2);
  auto first = testing::RunMultiProcess(split, 4, {.steps = 6, .save_at_end = true});
  ASSERT_TRUE(first.ok()) << first.status();
  job.mutable_train()->set_resume("latest");
  auto second = testing::RunSingleProcess(job);
  ASSERT_TRUE(second.ok()) << second.status();
  const testing::ParityRun joined = Joined(*first, *second);
  testing::ExpectParity(*straight, joined, 1e-4, 1e-3, "ep2 x tp2 -> one process");
  std::printf("ep2 x tp2 -> one process: max loss rdiff %.2e, max param diff %.2e\n",
              testing::MaxLossRelDiff(joined, *straight),
              testing::MaxRelativeDifference(joined.params, straight->params));
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A resume under another --steps moves the LR schedule's end: the run says so
// (it used to change the curve without a word). The same schedule says nothing.
TEST(ResumeScheduleTest, AnotherScheduleIsNoted) {
  GptJob job = BaseJob();
  job.mutable_train()->set_steps(2);
  const std::string dir = FreshDir("resume_schedule");
  job.mutable_train()->set_checkpoint_dir(dir);
  {
    absl::StatusOr<std::unique_ptr<Trainer>> first = Trainer::Create(testing::GptTrainerOptions(job));
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_TRUE((*first)->Run().ok());
  }
  for (const int64_t steps : {2, 4}) {
    GptJob resumed = job;
    resumed.mutable_train()->set_steps(steps);
    resumed.mutable_train()->set_resume("auto");
    const std::string metrics = absl::StrCat(dir, "/metrics_", steps, ".jsonl");
    resumed.mutable_train()->set_metrics_out(metrics);
    absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(testing::GptTrainerOptions(resumed));
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE((*t)->Run().ok());
    const bool noted = ReadFile(metrics).find("learning-rate schedule differs") != std::string::npos;
    EXPECT_EQ(noted, steps != 2) << "steps " << steps << ": " << ReadFile(metrics);
  }
}

}  // namespace
}  // namespace weft
