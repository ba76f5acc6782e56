#include "tests/tp_single_rank.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "comm/store/hash_store.h"
#include "gtest/gtest.h"
#include "tests/tiny_gpt.h"

namespace weft::testing {
namespace {

struct Run {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> params;
};

Run Train(const GptJob& job, int steps) {
  JobTopology topology;
  topology.store = std::make_shared<comm::HashStore>();
  auto trainer = MakeGptTrainer(job, topology);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return {};
  Run run;
  for (int i = 0; i < steps; ++i) {
    auto s = (*trainer)->TrainStep();
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return run;
    run.losses.push_back(s->loss);
  }
  auto params = ParameterSnapshot(**trainer);
  EXPECT_TRUE(params.ok()) << params.status();
  if (params.ok()) run.params = *std::move(params);
  return run;
}

}  // namespace

void ExpectTp1MatchesPlain(GptJob job, const std::string& backend, int steps, double loss_rtol,
                           double param_tol) {
  job.mutable_train()->mutable_parallel()->set_backend(backend);
  const Run plain = Train(job, steps);
  job.mutable_train()->mutable_parallel()->set_strategy("tp");
  job.mutable_train()->mutable_parallel()->set_tp(1);
  const Run tp = Train(job, steps);
  ASSERT_EQ(plain.losses.size(), static_cast<size_t>(steps));
  ASSERT_EQ(tp.losses.size(), plain.losses.size());
  double worst = 0;
  for (size_t i = 0; i < tp.losses.size(); ++i) {
    const double rel = std::fabs(tp.losses[i] - plain.losses[i]) / std::fabs(plain.losses[i]);
    worst = std::max(worst, rel);
    EXPECT_LE(rel, loss_rtol) << "step " << i + 1 << ": " << tp.losses[i] << " vs "
                              << plain.losses[i];
  }
  ASSERT_EQ(tp.params.size(), plain.params.size());
  const double param_diff = MaxRelativeDifference(tp.params, plain.params);
  std::printf("%s %s tp=1 vs plain, %d steps: loss %.4f -> %.4f, max loss rel diff %.2e, "
              "max param diff %.2e\n",
              job.train().device().c_str(), backend.c_str(), steps, plain.losses.front(),
              plain.losses.back(), worst, param_diff);
  EXPECT_LE(param_diff, param_tol);
}

}  // namespace weft::testing
