// The local_sgd plugin (strategies/local_sgd), loaded with --plugin as a
// user would: each rank steps on its own gradients and the parameters are
// averaged every sync_every steps. The parity harness (tests/parity.h)
// requires identical replicas of the optimizer state, which local_sgd keeps
// per rank, so this test runs the ranks itself and records every rank's
// parameters after every step.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/testing/multiprocess.h"
#include "core/base/status_macros.h"
#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

constexpr int kWorld = 2;

std::string PluginPath() {
  return std::string(std::getenv("TEST_SRCDIR")) +
         "/weft/strategies/local_sgd/libweft_local_sgd.so";
}

GptJob Job(const std::string& strategy, const std::string& options, int steps) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  TrainConfig* t = job.mutable_train();
  t->set_steps(steps);
  t->set_micro_batch(4);  // global_batch 8 over 2 ranks
  ParallelConfig* p = t->mutable_parallel();
  p->set_plugin(PluginPath());
  p->set_strategy(strategy);
  p->set_strategy_options(options);
  return job;
}

// Plain SGD without clipping: updates are linear in the gradients, so
// averaging the ranks' updates (local_sgd, sync_every=1) is ddp's update of
// the averaged gradient.
GptJob SgdJob(const std::string& strategy, const std::string& options, int steps) {
  GptJob job = Job(strategy, options, steps);
  OptimConfig* o = job.mutable_train()->mutable_optim();
  o->set_name("sgd");
  o->set_lr(0.5f);
  o->set_min_lr(0.05f);
  o->set_grad_clip(0.f);
  return job;
}

struct Trace {
  std::vector<double> losses;                   // global loss per step (rank 0's log)
  std::vector<std::vector<float>> params[kWorld];  // per rank, per step: all parameters
};

std::string TracePath(int run, int rank) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/local_sgd_", run, "_rank", rank, ".bin");
}

// Each rank trains and writes (loss, its parameters) after every step.
absl::StatusOr<Trace> RunRanksTraced(const GptJob& job) {
  static int run_id = 0;
  const int run = run_id++;
  const int steps = static_cast<int>(job.train().steps());
  const auto results = comm::testing::RunRanks(
      comm::testing::RankMode::kProcesses, kWorld,
      [&](const comm::testing::RankContext& rc) -> absl::Status {
        const JobTopology topo = testing::RankTopology(rc);
        WEFT_ASSIGN_OR_RETURN(auto trainer, testing::MakeGptTrainer(job, topo));
        FILE* f = std::fopen(TracePath(run, rc.rank).c_str(), "wb");
        if (f == nullptr) return absl::InternalError("cannot write " + TracePath(run, rc.rank));
        for (int s = 0; s < steps; ++s) {
          WEFT_ASSIGN_OR_RETURN(StepStats st, trainer->TrainStep());
          std::vector<float> all;
          for (Parameter* p : trainer->model().Parameters()) {
            WEFT_ASSIGN_OR_RETURN(std::vector<float> v, p->value.ToFloats());
            all.insert(all.end(), v.begin(), v.end());
          }
          const int64_t n = static_cast<int64_t>(all.size());
          std::fwrite(&st.loss, sizeof(double), 1, f);
          std::fwrite(&n, sizeof(n), 1, f);
          std::fwrite(all.data(), sizeof(float), all.size(), f);
        }
        std::fclose(f);
        return absl::OkStatus();
      },
      {.deadline = absl::Seconds(240), .timeout = absl::Seconds(60)});
  WEFT_RETURN_IF_ERROR(comm::testing::AllRanksOk(results));
  Trace trace;
  for (int r = 0; r < kWorld; ++r) {
    FILE* f = std::fopen(TracePath(run, r).c_str(), "rb");
    if (f == nullptr) return absl::InternalError("cannot read " + TracePath(run, r));
    for (int s = 0; s < steps; ++s) {
      double loss = 0;
      int64_t n = 0;
      if (std::fread(&loss, sizeof(loss), 1, f) != 1 || std::fread(&n, sizeof(n), 1, f) != 1) {
        std::fclose(f);
        return absl::DataLossError(absl::StrCat("trace of rank ", r, " ends at step ", s));
      }
      std::vector<float> v(n);
      const size_t got = std::fread(v.data(), sizeof(float), n, f);
      if (got != static_cast<size_t>(n)) {
        std::fclose(f);
        return absl::DataLossError("short trace");
      }
      if (r == 0) trace.losses.push_back(loss);
      trace.params[r].push_back(std::move(v));
    }
    std::fclose(f);
  }
  return trace;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  }
  return m;
}

TEST(LocalSgdTest, SyncEveryStepMatchesDdpUnderSgd) {
  constexpr int kSteps = 8;
  auto ddp = RunRanksTraced(SgdJob("ddp", "", kSteps));
  ASSERT_TRUE(ddp.ok()) << ddp.status();
  auto local = RunRanksTraced(SgdJob("local_sgd", "sync_every=1", kSteps));
  ASSERT_TRUE(local.ok()) << local.status();
  double loss_rel = 0, param_diff = 0;
  for (int s = 0; s < kSteps; ++s) {
    loss_rel = std::max(loss_rel, std::fabs(local->losses[s] - ddp->losses[s]) / ddp->losses[s]);
    param_diff = std::max(param_diff, MaxAbsDiff(local->params[0][s], ddp->params[0][s]));
    // Averaged right after every update: the replicas agree bitwise.
    EXPECT_EQ(local->params[0][s], local->params[1][s]) << "step " << s + 1;
  }
  std::printf("sgd, sync_every=1 vs ddp over %d steps: max loss rel diff %.3g, max param diff %.3g"
              " (loss %.4f -> %.4f)\n",
              kSteps, loss_rel, param_diff, local->losses.front(), local->losses.back());
  EXPECT_LE(loss_rel, 1e-5);
  EXPECT_LE(param_diff, 1e-5);
  EXPECT_LT(local->losses.back(), local->losses.front());
  // And single-process training of the same global batch (the contract
  // every strategy is held to), not only ddp.
  GptJob one = SgdJob("", "", kSteps);
  one.mutable_train()->set_micro_batch(8);
  one.mutable_train()->mutable_parallel()->clear_plugin();
  auto single = testing::RunSingleProcess(one);
  ASSERT_TRUE(single.ok()) << single.status();
  ASSERT_EQ(single->losses.size(), static_cast<size_t>(kSteps));
  double single_rel = 0;
  for (int s = 0; s < kSteps; ++s) {
    single_rel = std::max(single_rel,
                          std::fabs(local->losses[s] - single->losses[s]) / single->losses[s]);
  }
  std::printf("sgd, sync_every=1 vs one process: max loss rel diff %.3g\n", single_rel);
  EXPECT_LE(single_rel, 1e-5);
}

// AdamW (the default), clipping on, sync_every=3: the replicas drift apart
// on their own samples and are equal, bitwise, right after each average.
TEST(LocalSgdTest, ReplicasEqualExactlyAfterEachSync) {
  constexpr int kSteps = 7, kSync = 3;
  auto local = RunRanksTraced(Job("local_sgd", absl::StrCat("sync_every=", kSync), kSteps));
  ASSERT_TRUE(local.ok()) << local.status();
  for (int s = 1; s <= kSteps; ++s) {
    const double d = MaxAbsDiff(local->params[0][s - 1], local->params[1][s - 1]);
    std::printf("step %d: loss %.4f, max |rank0 - rank1| %.3g\n", s, local->losses[s - 1], d);
    if (s % kSync == 0) {
      EXPECT_EQ(d, 0.0) << "step " << s << " is a sync step";
    } else {
      EXPECT_GT(d, 0.0) << "step " << s << " is a local step";
    }
  }
  EXPECT_LT(local->losses.back(), local->losses.front());
  auto ddp = RunRanksTraced(Job("ddp", "", kSteps));
  ASSERT_TRUE(ddp.ok()) << ddp.status();
  std::printf("adamw final loss: local_sgd(sync_every=%d) %.4f, ddp %.4f\n", kSync,
              local->losses.back(), ddp->losses.back());
  EXPECT_NEAR(local->losses.back(), ddp->losses.back(), 0.05 * ddp->losses.back());
}

TEST(LocalSgdTest, BadOptionsAreClearErrors) {
  GptJob job = Job("local_sgd", "sync_every=0", 1);
  absl::Status s = testing::MakeGptTrainer(job).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("local_sgd.sync_every=0; expected sync_every >= 1"),
            std::string::npos)
      << s;
  job.mutable_train()->mutable_parallel()->set_strategy_options("sync_every=often");
  s = testing::MakeGptTrainer(job).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("sync_every"), std::string::npos) << s;
}

}  // namespace
}  // namespace weft
