#include "core/runtime/job_agreement.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/store/hash_store.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

constexpr char kJob[] = R"(train {
  device: "cuda:0"
  steps: 100
  seed: 1337
  metrics_out: "/tmp/m0.jsonl"
  optim {
    lr: 0.003
  }
  data {
    data: "/node0/corpus.txt"
    tokenizer: "/node0/tok.txt"
    num_workers: 2
  }
}
model {
  n_layer: 2
}
sample_every: 50)";

std::string With(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

// Runs one thread per rank, each with its own job text, on one store.
std::vector<absl::Status> RunRanks(comm::Store& store, const std::vector<std::string>& texts) {
  const int n = static_cast<int>(texts.size());
  std::vector<absl::Status> status(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      status[r] = CheckSameAsRankZero(store, JobRound(), r, n, texts[r], absl::Seconds(5));
    });
  }
  for (std::thread& t : ranks) t.join();
  return status;
}

// Rank 1's status; rank 0 ends with the same one.
absl::Status RankOneAgainstRankZero(comm::Store& store, const std::string& zero,
                                    const std::string& one) {
  const std::vector<absl::Status> s = RunRanks(store, {zero, one});
  EXPECT_EQ(s[0].message(), s[1].message()) << "rank 0 learns rank 1's outcome";
  return s[1];
}

TEST(JobAgreementTest, PathsAndLocalKnobsMayDifferTheMathMayNot) {
  comm::HashStore store;
  const std::string zero = AgreementText(kJob);
  // Another node's paths, device index, loader workers and rank-0 sampling.
  std::string other = kJob;
  other = With(other, "/node0/corpus.txt", "/node1/corpus.txt");
  other = With(other, "/node0/tok.txt", "/node1/tok.txt");
  other = With(other, "cuda:0", "cuda:1");
  other = With(other, "num_workers: 2", "num_workers: 4");
  other = With(other, "m0.jsonl", "m1.jsonl");
  other = With(other, "sample_every: 50", "sample_every: 0");
  EXPECT_TRUE(RankOneAgainstRankZero(store, zero, AgreementText(other)).ok());

  // Another learning rate: named with both values. A second round on the
  // same store compares with this round's rank 0, not the first's.
  absl::Status s =
      RankOneAgainstRankZero(store, zero, AgreementText(With(kJob, "lr: 0.003", "lr: 0.03")));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("rank 1 runs another job than rank 0: 'lr: 0.03' here, 'lr: 0.003' "
                             "on rank 0"),
            std::string::npos)
      << s;
  // The device type is, its index not (above).
  s = RankOneAgainstRankZero(store, zero, AgreementText(With(kJob, "cuda:0", "cpu")));
  EXPECT_NE(s.message().find("'device: \"cpu\"' here, 'device: \"cuda\"' on rank 0"),
            std::string::npos)
      << s;
  // A tokenizer spec (not a path) is part of the job.
  const std::string bpe = With(kJob, "\"/node0/tok.txt\"", "\"bpe:4096\"");
  s = RankOneAgainstRankZero(store, AgreementText(bpe),
                             AgreementText(With(bpe, "bpe:4096", "bpe:8192")));
  EXPECT_NE(s.message().find("'tokenizer: \"bpe:8192\"' here"), std::string::npos) << s;
}

// Rank 0 names the rank that disagreed, at once (it used to return OK and
// wait at its first collective for the rank that had left), and a rank
// that agreed stops with it.
TEST(JobAgreementTest, EveryRankFailsNamingTheFirstRankThatDisagreed) {
  comm::HashStore store;
  const std::string zero = AgreementText(kJob);
  const std::string other = AgreementText(With(kJob, "seed: 1337", "seed: 7"));
  const absl::Time start = absl::Now();
  const std::vector<absl::Status> s = RunRanks(store, {zero, zero, other, other});
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(s[r].code(), absl::StatusCode::kFailedPrecondition) << "rank " << r;
  }
  EXPECT_NE(s[0].message().find("rank 2 runs another job than rank 0: 'seed: 7' here"),
            std::string::npos)
      << s[0];
  EXPECT_EQ(s[1].message(), s[0].message());
  EXPECT_NE(s[3].message().find("rank 3 runs another job"), std::string::npos) << s[3];
  // All agreeing: every rank goes on.
  for (const absl::Status& ok : RunRanks(store, {zero, zero, zero})) EXPECT_TRUE(ok.ok()) << ok;
}

TEST(JobAgreementTest, ASingleRankChecksNothing) {
  comm::HashStore store;
  EXPECT_TRUE(CheckSameAsRankZero(store, JobRound(), 0, 1, "x", absl::Seconds(1)).ok());
}

}  // namespace
}  // namespace weft
