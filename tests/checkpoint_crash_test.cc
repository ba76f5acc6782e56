// Crashes during a save never lose the previous checkpoint: a child process
// trains with a save every step and is SIGKILLed at a seeded point of one
// of its saves (after its data file, after metadata.pb, after the rename,
// after pruning) or after a seeded random delay. Every time, the newest
// complete checkpoint verifies and resumes, and the leftovers are cleaned.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "checkpoint/dir_lock.h"
#include "checkpoint/layout.h"
#include "checkpoint/loader.h"
#include "gtest/gtest.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPoints[] = {"rank_file_written", "metadata_written", "renamed", "pruned"};

GptJob CrashJob(const std::string& dir) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(6);
  job.mutable_train()->set_checkpoint_dir(dir);
  job.mutable_train()->set_checkpoint_every(1);
  job.mutable_train()->set_keep_last(2);
  job.mutable_train()->mutable_data()->set_num_workers(0);  // no threads across fork
  return job;
}

// Runs the job in a child that dies with SIGKILL at `point` of save `save`
// (1-based), or at a random time when point is null; returns once it died.
void TrainAndDie(const GptJob& job, int save, const char* point, int delay_us) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int saves = 0;
    auto trainer = testing::MakeGptTrainer(job, std::nullopt, [&](Trainer::Options& o) {
      o.checkpoint_fault_point = [&](absl::string_view p) {
        if (p == "rank_file_written") ++saves;
        if (point != nullptr && saves == save && p == point) raise(SIGKILL);
      };
    });
    if (!trainer.ok()) _exit(3);
    if (point == nullptr) {
      std::thread([delay_us] {
        std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
        raise(SIGKILL);
      }).detach();
    }
    const absl::Status s = (*trainer)->Run();
    if (point == nullptr) pause();  // the timer may fire after training ended
    _exit(s.ok() ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the child was to die by SIGKILL; exit status " << status;
}

// The newest complete checkpoint is `expected` (0: none), verifies, and a
// new trainer resumes from it and cleans the leftovers.
void ExpectLoadable(const GptJob& job, const std::string& dir, int64_t expected,
                    const std::string& label) {
  auto all = ckpt::ListCheckpoints(dir);
  ASSERT_TRUE(all.ok()) << all.status();
  if (expected >= 0) {
    ASSERT_EQ(all->empty() ? 0 : all->back().step, expected) << label;
  }
  std::printf("%s: newest complete checkpoint %lld\n", label.c_str(),
              static_cast<long long>(all->empty() ? 0 : all->back().step));
  if (all->empty()) return;
  auto ck = ckpt::OpenCheckpoint(all->back().path);
  ASSERT_TRUE(ck.ok()) << label << ": " << ck.status();
  EXPECT_TRUE(ckpt::VerifyChecksums(*ck, nullptr).ok()) << label;
  GptJob resumed = job;
  resumed.mutable_train()->set_resume("latest");
  auto trainer = testing::MakeGptTrainer(resumed);
  ASSERT_TRUE(trainer.ok()) << label << ": " << trainer.status();
  EXPECT_EQ((*trainer)->step(), all->back().step) << label;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == ckpt::kLockFile) continue;  // the running job's (dir_lock.h)
    EXPECT_EQ(name.find('.'), std::string::npos) << label << ": leftover " << name;
  }
  auto s = (*trainer)->TrainStep();
  EXPECT_TRUE(s.ok()) << label << ": " << s.status();
}

TEST(CheckpointCrashTest, KilledAtSeededPointsOfASave) {
  for (int seed = 0; seed < 20; ++seed) {
    std::mt19937 rng(seed);
    const int save = 1 + static_cast<int>(rng() % 5);
    const char* point = kPoints[rng() % 4];
    const std::string label = absl::StrCat("seed ", seed, ": save ", save, " at ", point);
    const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/crash_", seed);
    fs::remove_all(dir);
    const GptJob job = CrashJob(dir);
    TrainAndDie(job, save, point, 0);
    // Before the rename the dying save is not there; from it on it is.
    const bool committed = std::string(point) == "renamed" || std::string(point) == "pruned";
    ExpectLoadable(job, dir, committed ? save : save - 1, label);
  }
}

TEST(CheckpointCrashTest, KilledAtRandomTimes) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 8; ++i) {
    const int delay_us = 120000 + static_cast<int>(rng() % 180000);
    const std::string label = absl::StrCat("kill after ", delay_us, " us");
    const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/crash_timed_", i);
    fs::remove_all(dir);
    const GptJob job = CrashJob(dir);
    TrainAndDie(job, 0, nullptr, delay_us);
    ExpectLoadable(job, dir, -1, label);
  }
}

}  // namespace
}  // namespace weft
