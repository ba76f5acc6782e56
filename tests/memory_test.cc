// Per-rank model-state memory of every data-parallel strategy at 4 ranks,
// measured with the allocators' exact peak statistics, against the ZeRO
// paper's formulas in their fp32 analogue (CPU: parameters and gradients
// are fp32 and the parameters are their own master, Adam keeps m and v):
//
//   none / ddp   4Ψ + 4Ψ + 8Ψ        = 16Ψ
//   zero-1       4Ψ + 4Ψ + 8Ψ/N
//   zero-2       4Ψ + (4Ψ + 8Ψ)/N
//   zero-3/fsdp  16Ψ/N
//
// (the mixed-precision forms 16Ψ, 4Ψ+12Ψ/N, 2Ψ+14Ψ/N, 16Ψ/N follow from
// 2-byte parameters and gradients plus a 12-byte optimizer state). Peaks
// include transient buffers (gathered layers, gradients in flight), so the
// model is deep and narrow to keep any one layer small, as at scale.
#include <algorithm>
#include <cstdio>

#include "gtest/gtest.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

constexpr int kWorld = 4;

GptJob DeepNarrowJob() {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(2);
  job.mutable_train()->set_micro_batch(2);
  job.mutable_model()->set_n_layer(64);
  job.mutable_model()->set_d_model(32);
  return job;
}

struct Row {
  std::string name;
  std::string strategy;
  int stage = 0;
  double expected_per_psi;  // bytes per parameter
  double expected_comm;     // bus bytes per step / (Psi bytes x (N-1)/N)
};

TEST(MemoryTest, ModelStateMatchesZeroFormulas) {
  GptJob job = DeepNarrowJob();
  auto single = testing::RunSingleProcess(job);
  ASSERT_TRUE(single.ok()) << single.status();
  double psi = 0;
  for (const auto& [name, v] : single->params) psi += static_cast<double>(v.size());
  const double n = kWorld;
  const std::vector<Row> rows = {
      {"none (1 process)", "", 0, 16, 0},
      {"ddp", "ddp", 0, 16, 2},
      {"zero-1", "zero", 1, 8 + 8 / n, 2},
      {"zero-2", "zero", 2, 4 + 12 / n, 2},
      {"zero-3", "zero", 3, 16 / n, 3},
      {"fsdp", "fsdp", 0, 16 / n, 3},
  };
  std::printf("Per-rank model state, GPT %d layers d=%d, Psi=%.0f parameters, N=%d (fp32)\n",
              job.model().n_layer(), job.model().d_model(), psi, kWorld);
  std::printf("%-17s %12s %12s %12s %12s %12s %8s %10s\n", "strategy", "params", "grads",
              "optimizer", "total", "formula", "ratio", "comm/Psi");
  for (const Row& row : rows) {
    testing::ParityRun run;
    if (row.strategy.empty()) {
      run = *single;
    } else {
      GptJob j = job;
      j.mutable_train()->mutable_parallel()->set_strategy(row.strategy);
      j.mutable_train()->mutable_parallel()->set_zero_stage(row.stage);
      j.mutable_train()->mutable_parallel()->set_bucket_mb(0.05);
      auto r = testing::RunMultiProcess(j, kWorld);
      ASSERT_TRUE(r.ok()) << row.name << ": " << r.status();
      run = *r;
    }
    const double total = run.memory["params"] + run.memory["grads"] + run.memory["optimizer"];
    const double formula = row.expected_per_psi * psi;
    // Communication per step in units of Psi parameter bytes, before the
    // bandwidth-optimal (N-1)/N factor: ddp ~2, zero-3/fsdp ~3.
    double bus = 0;
    for (const auto& [op, bytes] : run.comm) bus += bytes;
    const double comm = bus / (4.0 * psi * (n - 1) / n);
    std::printf("%-17s %12.0f %12.0f %12.0f %12.0f %12.0f %8.3f %10.3f\n", row.name.c_str(),
                run.memory["params"], run.memory["grads"], run.memory["optimizer"], total,
                formula, total / formula, comm);
    EXPECT_NEAR(total / formula, 1.0, 0.10) << row.name;
    EXPECT_NEAR(comm, row.expected_comm, 0.1 * std::max(1.0, row.expected_comm)) << row.name;
  }
}

}  // namespace
}  // namespace weft
