#include "core/runtime/job_agreement.h"

#include <string>
#include <thread>
#include <vector>

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

// Runs rank 0 and rank 1 with their own job texts on one store; rank 1's status.
absl::Status RankOneAgainstRankZero(comm::Store& store, const std::string& zero,
                                    const std::string& one) {
  absl::Status status0, status1;
  std::thread r0([&] { status0 = CheckSameAsRankZero(store, JobRound(), 0, 2, zero, absl::Seconds(5)); });
  std::thread r1([&] { status1 = CheckSameAsRankZero(store, JobRound(), 1, 2, one, absl::Seconds(5)); });
  r0.join();
  r1.join();
  EXPECT_TRUE(status0.ok()) << status0;
  return status1;
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

TEST(JobAgreementTest, ASingleRankChecksNothing) {
  comm::HashStore store;
  EXPECT_TRUE(CheckSameAsRankZero(store, JobRound(), 0, 1, "x", absl::Seconds(1)).ok());
}

}  // namespace
}  // namespace weft
