// Every collective of the gloo backend with exact expected values: world
// sizes 1-4 as threads and 2 and 4 as processes (TcpStore), dtypes f32,
// bf16, f16, i32, i64 (u16 where data only moves), uneven and zero sizes.
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/process_group/registry.h"
#include "comm/testing/expect.h"
#include "comm/testing/multiprocess.h"
#include "core/base/status_macros.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

using testing::ExpectTensor;
using testing::ExpectTrue;
using testing::MakeTensor;
using testing::RankContext;
using testing::RankMode;

constexpr DType kAllDTypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kI64};
constexpr DType kMainDTypes[] = {DType::kF32, DType::kBF16, DType::kI64};

bool IsFloat(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

// Small integers: exact in every dtype, sums included (< 256 for bf16).
double Value(int rank, int64_t i) { return (rank + 1) * (i % 5 + 1) - rank; }

class GlooCollectivesTest : public ::testing::TestWithParam<std::tuple<RankMode, int>> {
 protected:
  // Runs `fn` on every rank with a fresh gloo group and expects success.
  void Run(const std::function<absl::Status(ProcessGroup&, int rank, int n)>& fn) {
    const auto [mode, n] = GetParam();
    auto results = testing::RunRanks(
        mode, n,
        [&](const RankContext& ctx) -> absl::Status {
          WEFT_ASSIGN_OR_RETURN(auto pg, ctx.NewGroup("gloo", {.timeout = absl::Seconds(20)}));
          return fn(*pg, ctx.rank, ctx.world_size);
        },
        {.deadline = absl::Seconds(50)});
    absl::Status all = testing::AllRanksOk(results);
    EXPECT_TRUE(all.ok()) << all;
  }
};

TEST_P(GlooCollectivesTest, AllReduceEveryOpDTypeAndSize) {
  Run([](ProcessGroup& pg, int rank, int n) -> absl::Status {
    for (DType dtype : kAllDTypes) {
      for (int64_t numel : {0, 1, 7, 33}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
          if (op == ReduceOp::kAvg && !IsFloat(dtype)) continue;
          std::vector<double> mine, want;
          for (int64_t i = 0; i < numel; ++i) {
            mine.push_back(Value(rank, i));
            double acc = Value(0, i);
            for (int r = 1; r < n; ++r) {
              const double v = Value(r, i);
              acc = op == ReduceOp::kMax ? std::max(acc, v)
                    : op == ReduceOp::kMin ? std::min(acc, v)
                                           : acc + v;
            }
            want.push_back(op == ReduceOp::kAvg ? static_cast<float>(acc) / n : acc);
          }
          WEFT_ASSIGN_OR_RETURN(Tensor t, MakeTensor(dtype, mine));
          WEFT_RETURN_IF_ERROR(pg.AllReduce(t, {.op = op})->Wait());
          WEFT_RETURN_IF_ERROR(ExpectTensor(
              t, want, absl::StrCat("all_reduce ", ReduceOpName(op), " numel ", numel)));
        }
      }
    }
    return absl::OkStatus();
  });
}

TEST_P(GlooCollectivesTest, ReduceScatterGivesEachRankItsReducedBlock) {
  Run([](ProcessGroup& pg, int rank, int n) -> absl::Status {
    for (DType dtype : kMainDTypes) {
      for (int64_t block : {0, 1, 3}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
          std::vector<double> in, want;
          for (int64_t i = 0; i < n * block; ++i) in.push_back(Value(rank, i));
          for (int64_t i = rank * block; i < (rank + 1) * block; ++i) {
            double acc = Value(0, i);
            for (int r = 1; r < n; ++r) {
              acc = op == ReduceOp::kSum ? acc + Value(r, i) : std::max(acc, Value(r, i));
            }
            want.push_back(acc);
          }
          WEFT_ASSIGN_OR_RETURN(Tensor input, MakeTensor(dtype, in));
          WEFT_ASSIGN_OR_RETURN(Tensor output, Tensor::Zeros({block}, dtype));
          WEFT_RETURN_IF_ERROR(pg.ReduceScatter(input, output, {.op = op})->Wait());
          WEFT_RETURN_IF_ERROR(ExpectTensor(output, want, absl::StrCat("reduce_scatter block ", block)));
          // In place: the output is this rank's block of the input.
          WEFT_ASSIGN_OR_RETURN(Tensor again, MakeTensor(dtype, in));
          Tensor own = again.Slice(0, rank * block, (rank + 1) * block);
          WEFT_RETURN_IF_ERROR(pg.ReduceScatter(again, own, {.op = op})->Wait());
          WEFT_RETURN_IF_ERROR(ExpectTensor(own, want, "in-place reduce_scatter"));
        }
      }
    }
    return absl::OkStatus();
  });
}

TEST_P(GlooCollectivesTest, AllGatherFlatAndInPlace) {
  Run([](ProcessGroup& pg, int rank, int n) -> absl::Status {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kI64, DType::kU16}) {
      for (int64_t block : {0, 1, 5}) {
        std::vector<double> mine, want;
        for (int64_t i = 0; i < block; ++i) mine.push_back(rank * 10 + i);
        for (int r = 0; r < n; ++r) {
          for (int64_t i = 0; i < block; ++i) want.push_back(r * 10 + i);
        }
        WEFT_ASSIGN_OR_RETURN(Tensor input, MakeTensor(dtype, mine));
        WEFT_ASSIGN_OR_RETURN(Tensor output, Tensor::Zeros({n * block}, dtype));
        WEFT_RETURN_IF_ERROR(pg.AllGather(input, output)->Wait());
        WEFT_RETURN_IF_ERROR(ExpectTensor(output, want, absl::StrCat("all_gather block ", block)));
        // In place: the input is this rank's block of the output.
        WEFT_ASSIGN_OR_RETURN(Tensor full, Tensor::Zeros({n * block}, dtype));
        Tensor own = full.Slice(0, rank * block, (rank + 1) * block);
        WEFT_RETURN_IF_ERROR(own.CopyFrom(input));
        WEFT_RETURN_IF_ERROR(pg.AllGather(own, full)->Wait());
        WEFT_RETURN_IF_ERROR(ExpectTensor(full, want, "in-place all_gather"));
      }
    }
    return absl::OkStatus();
  });
}

TEST_P(GlooCollectivesTest, AllGatherUnevenParts) {
  Run([](ProcessGroup& pg, int rank, int n) -> absl::Status {
    auto part_size = [](int r) -> int64_t { return (r * 2) % 3; };  // 0, 2, 1, 0, ...
    for (DType dtype : kMainDTypes) {
      std::vector<double> mine;
      for (int64_t i = 0; i < part_size(rank); ++i) mine.push_back(100 * rank + i);
      WEFT_ASSIGN_OR_RETURN(Tensor input, MakeTensor(dtype, mine));
      std::vector<Tensor> outputs;
      for (int r = 0; r < n; ++r) {
        WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros({part_size(r)}, dtype));
        outputs.push_back(t);
      }
      WEFT_RETURN_IF_ERROR(pg.AllGather(input, outputs)->Wait());
      for (int r = 0; r < n; ++r) {
        std::vector<double> want;
        for (int64_t i = 0; i < part_size(r); ++i) want.push_back(100 * r + i);
        WEFT_RETURN_IF_ERROR(ExpectTensor(outputs[r], want, absl::StrCat("part ", r)));
      }
    }
    return absl::OkStatus();
  });
}

TEST_P(GlooCollectivesTest, BroadcastFromEveryRoot) {
  Run([](ProcessGroup& pg, int rank, int n) -> absl::Status {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kI64, DType::kU16}) {
      for (int root = 0; root < n; ++root) {
        for (int64_t numel : {0, 6}) {
          std::vector<double> mine, want;
          for (int64_t i = 0; i < numel; ++i) {
            mine.push_back(rank == root ? 7 * root + i : -1);
            want.push_back(7 * root + i);
          }
          WEFT_ASSIGN_OR_RETURN(Tensor t, MakeTensor(dtype, mine));
          WEFT_RETURN_IF_ERROR(pg.Broadcast(t, {.root = root})->Wait());
          WEFT_RETURN_IF_ERROR(ExpectTensor(t, want, absl::StrCat("broadcast root ", root)));
        }
      }
    }
    return absl::OkStatus();
  });
}

TEST_P(GlooCollectivesTest, AllToAllEvenBlocks) {
  Run([](ProcessGroup& pg, int rank, int n) -> absl::Status {
    for (DType dtype : kMainDTypes) {
      for (int64_t block : {0, 2}) {
        // Element (dst, j) of my input is 100*me + 10*dst + j.
        std::vector<double> in, want;
        for (int dst = 0; dst < n; ++dst) {
          for (int64_t j = 0; j < block; ++j) in.push_back(100 * rank + 10 * dst + j);
        }
        for (int src = 0; src < n; ++src) {
          for (int64_t j = 0; j < block; ++j) want.push_back(100 * src + 10 * rank + j);
        }
        WEFT_ASSIGN_OR_RETURN(Tensor input, MakeTensor(DType::kI64, in));
        if (dtype != DType::kI64) {
          WEFT_ASSIGN_OR_RETURN(input, input.ToDType(DType::kF32));
          if (dtype == DType::kBF16) {
            // Values above 256 are not exact in bf16; keep them small.
            for (double& v : in) v = std::fmod(v, 200);
            for (double& v : want) v = std::fmod(v, 200);
            WEFT_ASSIGN_OR_RETURN(input, MakeTensor(dtype, in));
          }
        }
        WEFT_ASSIGN_OR_RETURN(Tensor output, Tensor::Zeros({n * block}, input.dtype()));
        WEFT_RETURN_IF_ERROR(pg.AllToAll(input, output)->Wait());
        WEFT_RETURN_IF_ERROR(ExpectTensor(output, want, absl::StrCat("all_to_all block ", block)));
        WEFT_RETURN_IF_ERROR(pg.AllToAll(input, input)->Wait());  // in place
        WEFT_RETURN_IF_ERROR(ExpectTensor(input, want, "in-place all_to_all"));
      }
    }
    return absl::OkStatus();
  });
}

TEST_P(GlooCollectivesTest, AllToAllVUnevenRows) {
  Run([](ProcessGroup& pg, int rank, int n) -> absl::Status {
    constexpr int64_t kRow = 2;
    auto rows = [](int src, int dst) -> int64_t { return (src + 2 * dst) % 3; };  // zeros too
    auto value = [](int src, int dst, int64_t row, int64_t col) -> double {
      return 1000 * src + 100 * dst + 10 * row + col;
    };
    std::vector<int64_t> in_splits, out_splits;
    std::vector<double> in, want;
    for (int dst = 0; dst < n; ++dst) {
      in_splits.push_back(rows(rank, dst));
      for (int64_t r = 0; r < rows(rank, dst); ++r) {
        for (int64_t c = 0; c < kRow; ++c) in.push_back(value(rank, dst, r, c));
      }
    }
    for (int src = 0; src < n; ++src) {
      out_splits.push_back(rows(src, rank));
      for (int64_t r = 0; r < rows(src, rank); ++r) {
        for (int64_t c = 0; c < kRow; ++c) want.push_back(value(src, rank, r, c));
      }
    }
    for (DType dtype : {DType::kF32, DType::kI64}) {
      const int64_t in_rows = static_cast<int64_t>(in.size()) / kRow;
      const int64_t out_rows = static_cast<int64_t>(want.size()) / kRow;
      WEFT_ASSIGN_OR_RETURN(Tensor input, MakeTensor(dtype, in, {in_rows, kRow}));
      WEFT_ASSIGN_OR_RETURN(Tensor output, Tensor::Zeros({out_rows, kRow}, dtype));
      WEFT_RETURN_IF_ERROR(pg.AllToAllV(input, in_splits, output, out_splits)->Wait());
      WEFT_RETURN_IF_ERROR(ExpectTensor(output, want, "all_to_all_v"));
    }
    return absl::OkStatus();
  });
}

TEST_P(GlooCollectivesTest, SendRecvAndRingExchange) {
  Run([](ProcessGroup& pg, int rank, int n) -> absl::Status {
    if (n == 1) return absl::OkStatus();  // nobody to talk to
    // Pairs: even ranks send to the next rank, which receives (tagged).
    if (rank % 2 == 0 && rank + 1 < n) {
      WEFT_ASSIGN_OR_RETURN(Tensor t, MakeTensor(DType::kBF16, {1.5, rank * 1.0, 3}));
      WEFT_RETURN_IF_ERROR(pg.Send(t, rank + 1, {.tag = 5})->Wait());
    } else if (rank % 2 == 1) {
      WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros({3}, DType::kBF16));
      WEFT_RETURN_IF_ERROR(pg.Recv(t, rank - 1, {.tag = 5})->Wait());
      WEFT_RETURN_IF_ERROR(ExpectTensor(t, {1.5, rank - 1.0, 3}, "recv"));
    }
    // With an odd n the last rank took no part above: point-to-point ops
    // must not shift the collective numbering, so this still lines up.
    WEFT_ASSIGN_OR_RETURN(Tensor count, MakeTensor(DType::kI64, {1}));
    WEFT_RETURN_IF_ERROR(pg.AllReduce(count)->Wait());
    WEFT_RETURN_IF_ERROR(ExpectTensor(count, {static_cast<double>(n)}, "all_reduce after p2p"));
    // Ring: everyone sends right and receives from the left at once.
    for (int64_t numel : {0, 4}) {
      std::vector<double> mine(numel, rank + 0.25);
      std::vector<double> want(numel, (rank + n - 1) % n + 0.25);
      WEFT_ASSIGN_OR_RETURN(Tensor out, MakeTensor(DType::kF32, mine));
      WEFT_ASSIGN_OR_RETURN(Tensor in, Tensor::Zeros({numel}, DType::kF32));
      WEFT_RETURN_IF_ERROR(
          pg.BatchSendRecv({P2POp{P2POp::Type::kSend, out, (rank + 1) % n, 1},
                            P2POp{P2POp::Type::kRecv, in, (rank + n - 1) % n, 1}})
              ->Wait());
      WEFT_RETURN_IF_ERROR(ExpectTensor(in, want, "ring"));
    }
    return absl::OkStatus();
  });
}

TEST_P(GlooCollectivesTest, BarrierWaitsForEveryRank) {
  Run([](ProcessGroup& pg, int rank, int n) -> absl::Status {
    WEFT_ASSIGN_OR_RETURN(Tensor flag, MakeTensor(DType::kI32, {1}));
    // Ranks arrive at different times; after the barrier all have arrived,
    // which the next all_reduce confirms.
    absl::SleepFor(absl::Milliseconds(20 * rank));
    WEFT_RETURN_IF_ERROR(pg.Barrier()->Wait());
    WEFT_RETURN_IF_ERROR(pg.AllReduce(flag)->Wait());
    return ExpectTensor(flag, {static_cast<double>(n)}, "count after barrier");
  });
}

// Deterministic and consistent: the same random inputs give bitwise the
// same all_reduce twice, equal to reduce_scatter followed by all_gather.
TEST_P(GlooCollectivesTest, ReductionsAreDeterministicAndConsistent) {
  Run([](ProcessGroup& pg, int rank, int n) -> absl::Status {
    const int64_t numel = 8 * n + 3;
    std::vector<float> values(numel);
    uint32_t state = 1234567u + 7919u * rank;
    for (float& v : values) {
      state = state * 1664525u + 1013904223u;
      v = static_cast<float>(state >> 8) / (1 << 24) - 0.5f;
    }
    WEFT_ASSIGN_OR_RETURN(Tensor a, Tensor::FromFloats(values, {numel}));
    WEFT_ASSIGN_OR_RETURN(Tensor b, Tensor::FromFloats(values, {numel}));
    WEFT_RETURN_IF_ERROR(pg.AllReduce(a)->Wait());
    WEFT_RETURN_IF_ERROR(pg.AllReduce(b)->Wait());
    WEFT_ASSIGN_OR_RETURN(auto va, a.ToVector<float>());
    WEFT_ASSIGN_OR_RETURN(auto vb, b.ToVector<float>());
    WEFT_RETURN_IF_ERROR(ExpectTrue(va == vb, "two identical all_reduces differ"));
    // Reduce-scatter + all-gather over a padded copy matches bit for bit
    // when the padding lines the blocks up with all_reduce's chunks.
    const int64_t block = (numel + n - 1) / n;
    const int64_t padded = block * n;
    std::vector<float> pad_values(padded, 0.0f);
    // all_reduce's chunks: the first numel % n ranks get ceil(numel / n).
    std::vector<int64_t> chunk(n, numel / n);
    for (int r = 0; r < numel % n; ++r) ++chunk[r];
    int64_t src = 0;
    for (int r = 0; r < n; ++r) {
      for (int64_t i = 0; i < chunk[r]; ++i) pad_values[r * block + i] = values[src + i];
      src += chunk[r];
    }
    WEFT_ASSIGN_OR_RETURN(Tensor in, Tensor::FromFloats(pad_values, {padded}));
    WEFT_ASSIGN_OR_RETURN(Tensor shard, Tensor::Zeros({block}, DType::kF32));
    WEFT_ASSIGN_OR_RETURN(Tensor gathered, Tensor::Zeros({padded}, DType::kF32));
    WEFT_RETURN_IF_ERROR(pg.ReduceScatter(in, shard)->Wait());
    WEFT_RETURN_IF_ERROR(pg.AllGather(shard, gathered)->Wait());
    WEFT_ASSIGN_OR_RETURN(auto vg, gathered.ToVector<float>());
    src = 0;
    for (int r = 0; r < n; ++r) {
      for (int64_t i = 0; i < chunk[r]; ++i) {
        if (vg[r * block + i] != va[src + i]) {
          return absl::InternalError(absl::StrCat("element ", src + i, ": all_reduce ", va[src + i],
                                                  " vs reduce_scatter+all_gather ", vg[r * block + i]));
        }
      }
      src += chunk[r];
    }
    return absl::OkStatus();
  });
}

TEST_P(GlooCollectivesTest, StatsCountWhatWasIssued) {
  Run([](ProcessGroup& pg, int rank, int n) -> absl::Status {
    WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros({250}, DType::kF32));  // 1000 B
    WEFT_ASSIGN_OR_RETURN(Tensor full, Tensor::Zeros({250 * n}, DType::kF32));
    WEFT_RETURN_IF_ERROR(pg.AllReduce(t)->Wait());
    WEFT_RETURN_IF_ERROR(pg.AllReduce(t)->Wait());
    WEFT_RETURN_IF_ERROR(pg.AllGather(t, full)->Wait());
    const CommStats s = pg.stats();
    WEFT_RETURN_IF_ERROR(ExpectTrue(s[OpKind::kAllReduce].calls == 2, "all_reduce calls"));
    WEFT_RETURN_IF_ERROR(
        ExpectTrue(s[OpKind::kAllReduce].bus_bytes == 2 * 2.0 * (n - 1) / n * 1000, "ar bus"));
    WEFT_RETURN_IF_ERROR(
        ExpectTrue(s[OpKind::kAllGather].bus_bytes == (n - 1) * 1000.0, "ag bus"));
    return absl::OkStatus();
  });
}

INSTANTIATE_TEST_SUITE_P(
    Threads, GlooCollectivesTest,
    ::testing::Combine(::testing::Values(RankMode::kThreads), ::testing::Values(1, 2, 3, 4)),
    [](const auto& info) { return absl::StrCat("n", std::get<1>(info.param)); });

INSTANTIATE_TEST_SUITE_P(
    Processes, GlooCollectivesTest,
    ::testing::Combine(::testing::Values(RankMode::kProcesses), ::testing::Values(2, 4)),
    [](const auto& info) { return absl::StrCat("n", std::get<1>(info.param)); });

}  // namespace
}  // namespace weft::comm
