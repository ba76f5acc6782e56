// Collective bandwidth of a weft process group, printed like nccl-tests.
//
//   bazel run -c opt //tools/bench:comm -- --backend=gloo --nproc_per_node=4
//   bazel run -c opt //tools/bench:comm -- --backend=nccl --nproc_per_node=8
//
// For every op and message size it reports the slowest rank's time per op
// (each rank takes the median over --batches batches of --iters back-to-back
// ops, which keeps one noisy moment on a shared machine out of the table),
// algbw = size / time and busbw = algbw x the op's bus factor (all_reduce
// 2(n-1)/n; reduce_scatter, all_gather, all_to_all (n-1)/n; broadcast 1), the
// same conventions as nccl-tests and as ProcessGroup::stats(). "size" is the
// whole buffer: the reduce_scatter input, the all_gather output.
// --nproc_per_node relaunches this binary under the launcher; it also runs
// under tools/launch, torchrun or srun directly.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "comm/env/init.h"
#include "comm/process_group/comm_stats.h"
#include "core/base/status_macros.h"
#include "tools/launch/relaunch.h"
#include "tools/bench/bench_flags.h"

ABSL_FLAG(std::string, backend, "gloo", "process group backend: gloo (CPU) or nccl (CUDA)");
ABSL_FLAG(std::string, ops, "all_reduce,reduce_scatter,all_gather,broadcast,all_to_all",
          "comma-separated ops to measure");
ABSL_FLAG(std::string, dtype, "f32", "element type: f32, bf16, f16, i32, i64");
ABSL_FLAG(int64_t, min_bytes, 1024, "smallest message size in bytes");
ABSL_FLAG(int64_t, max_bytes, 16 << 20, "largest message size in bytes");
ABSL_FLAG(int, step_factor, 4, "multiply the size by this between rows");
ABSL_FLAG(int, iters, 10, "timed iterations per batch");
ABSL_FLAG(int, batches, 5, "timed batches per size; the median batch is reported");
ABSL_FLAG(int, warmup, 5, "untimed iterations per size");
ABSL_FLAG(double, timeout_s, 300, "op timeout in seconds");

namespace weft::comm {
namespace {

using Clock = std::chrono::steady_clock;

struct OpSpec {
  OpKind kind;
  const char* redop;
  int root;
};

absl::StatusOr<OpSpec> ParseOp(absl::string_view name) {
  if (name == "all_reduce") return OpSpec{OpKind::kAllReduce, "sum", -1};
  if (name == "reduce_scatter") return OpSpec{OpKind::kReduceScatter, "sum", -1};
  if (name == "all_gather") return OpSpec{OpKind::kAllGather, "none", -1};
  if (name == "broadcast") return OpSpec{OpKind::kBroadcast, "none", 0};
  if (name == "all_to_all") return OpSpec{OpKind::kAllToAll, "none", -1};
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown op '", name, "'; expected all_reduce, reduce_scatter, all_gather, broadcast or "
      "all_to_all"));
}

const char* NcclTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "float";
    case DType::kBF16:
      return "bfloat16";
    case DType::kF16:
      return "half";
    case DType::kI32:
      return "int32";
    case DType::kI64:
      return "int64";
    case DType::kU16:
      return "uint16";
  }
  return "?";
}

// Issues one op over buffers sized for `total` elements (the whole buffer).
std::shared_ptr<Work> IssueOp(ProcessGroup& pg, OpKind kind, const Tensor& big,
                              const Tensor& small, const Tensor& out) {
  switch (kind) {
    case OpKind::kAllReduce:
      return pg.AllReduce(big);
    case OpKind::kReduceScatter:
      return pg.ReduceScatter(big, small);
    case OpKind::kAllGather:
      return pg.AllGather(small, big);
    case OpKind::kBroadcast:
      return pg.Broadcast(big);
    case OpKind::kAllToAll:
      return pg.AllToAll(big, out);
    default:
      return nullptr;
  }
}

// The slowest rank's value, so the table shows what the job experiences.
absl::StatusOr<double> MaxOverRanks(ProcessGroup& pg, double value) {
  WEFT_ASSIGN_OR_RETURN(Tensor host, Tensor::FromFloats({static_cast<float>(value)}, {1}));
  WEFT_ASSIGN_OR_RETURN(Tensor t, host.To(pg.device()));
  WEFT_RETURN_IF_ERROR(pg.AllReduce(t, {.op = ReduceOp::kMax})->Synchronize());
  WEFT_ASSIGN_OR_RETURN(std::vector<float> v, t.ToFloats());
  return v[0];
}

absl::Status Run() {
  WEFT_ASSIGN_OR_RETURN(DType dtype, ParseDType(absl::GetFlag(FLAGS_dtype)));
  const absl::Duration timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  WEFT_ASSIGN_OR_RETURN(
      DistributedContext dist,
      InitDistributedFromEnv({.backend = absl::GetFlag(FLAGS_backend), .timeout = timeout}));
  ProcessGroup& pg = *dist.world;
  const int n = pg.size();
  const size_t esize = DTypeSize(dtype);
  const bool leader = pg.rank() == 0;
  if (leader) {
    std::printf("# weft comm benchmark (nccl-tests format): backend %s, %d ranks on %d node(s), "
                "%s, median of %d batches x %d iters, %d warmup\n#\n",
                pg.backend().c_str(), n, n / dist.env.local_world_size, NcclTypeName(dtype),
                absl::GetFlag(FLAGS_batches), absl::GetFlag(FLAGS_iters),
                absl::GetFlag(FLAGS_warmup));
    std::printf("# %10s %12s %8s %6s %6s %10s %8s %8s\n", "size", "count", "type", "redop",
                "root", "time", "algbw", "busbw");
    std::printf("# %10s %12s %8s %6s %6s %10s %8s %8s\n", "(B)", "(elements)", "", "", "",
                "(us)", "(GB/s)", "(GB/s)");
  }
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_ops), ',')) {
    WEFT_ASSIGN_OR_RETURN(OpSpec spec, ParseOp(name));
    if (leader) std::printf("# %s\n", std::string(name).c_str());
    for (int64_t bytes = absl::GetFlag(FLAGS_min_bytes); bytes <= absl::GetFlag(FLAGS_max_bytes);
         bytes *= absl::GetFlag(FLAGS_step_factor)) {
      // Whole-buffer element count, a multiple of the group size.
      const int64_t count = std::max<int64_t>(n, bytes / static_cast<int64_t>(esize) / n * n);
      const int64_t size_bytes = count * static_cast<int64_t>(esize);
      WEFT_ASSIGN_OR_RETURN(Tensor big, Tensor::Zeros({count}, dtype, pg.device()));
      WEFT_ASSIGN_OR_RETURN(Tensor small, Tensor::Zeros({count / n}, dtype, pg.device()));
      WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros({count}, dtype, pg.device()));
      for (int i = 0; i < absl::GetFlag(FLAGS_warmup); ++i) {
        WEFT_RETURN_IF_ERROR(IssueOp(pg, spec.kind, big, small, out)->Synchronize());
      }
      const int iters = absl::GetFlag(FLAGS_iters);
      std::vector<double> batch_seconds;
      for (int b = 0; b < std::max(1, absl::GetFlag(FLAGS_batches)); ++b) {
        WEFT_RETURN_IF_ERROR(pg.Barrier()->Synchronize());
        const auto start = Clock::now();
        std::vector<std::shared_ptr<Work>> works;
        for (int i = 0; i < iters; ++i) works.push_back(IssueOp(pg, spec.kind, big, small, out));
        for (auto& w : works) WEFT_RETURN_IF_ERROR(w->Synchronize());
        batch_seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count() /
                                iters);
      }
      std::sort(batch_seconds.begin(), batch_seconds.end());
      const double seconds = batch_seconds[batch_seconds.size() / 2];
      WEFT_ASSIGN_OR_RETURN(double worst, MaxOverRanks(pg, seconds));
      const double algbw = static_cast<double>(size_bytes) / worst / 1e9;
      const double busbw = BusBytes(spec.kind, size_bytes, n, size_bytes / n) /
                           static_cast<double>(size_bytes) * algbw;
      if (leader) {
        std::printf("  %10lld %12lld %8s %6s %6d %10.1f %8.3f %8.3f\n",
                    static_cast<long long>(size_bytes), static_cast<long long>(count),
                    NcclTypeName(dtype), spec.redop, spec.root, worst * 1e6, algbw,
                    n == 1 ? 0.0 : busbw);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace weft::comm

int main(int argc, char** argv) {
  auto relaunch = weft::launch::MaybeRelaunchSelf(&argc, argv);
  if (!relaunch.ok()) {
    std::fprintf(stderr, "comm benchmark: %s\n", relaunch.status().ToString().c_str());
    return 2;
  }
  if (relaunch->relaunched) return relaunch->exit_code;
  weft::bench::ParseBenchmarkFlags(
      argc, argv,
      "Collective bandwidth (nccl-tests format): each op over message sizes, on gloo or NCCL.\n"
      "usage: comm [--nproc_per_node=N] [--ops=all_reduce,...] [--min_bytes=B] [--max_bytes=B]");
  using weft::bench::RequireFlag;
  const int64_t lo = absl::GetFlag(FLAGS_min_bytes), hi = absl::GetFlag(FLAGS_max_bytes);
  RequireFlag(lo >= 1, absl::StrCat("min_bytes=", lo), "at least 1");
  RequireFlag(hi >= lo, absl::StrCat("max_bytes=", hi), absl::StrCat("at least --min_bytes=", lo));
  RequireFlag(absl::GetFlag(FLAGS_step_factor) >= 2,
              absl::StrCat("step_factor=", absl::GetFlag(FLAGS_step_factor)),
              "at least 2 (the size grows by it between rows)");
  RequireFlag(absl::GetFlag(FLAGS_iters) >= 1, absl::StrCat("iters=", absl::GetFlag(FLAGS_iters)),
              "at least 1");
  RequireFlag(absl::GetFlag(FLAGS_batches) >= 1,
              absl::StrCat("batches=", absl::GetFlag(FLAGS_batches)), "at least 1");
  absl::Status s = weft::comm::Run();
  if (!s.ok()) {
    std::fprintf(stderr, "comm benchmark: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
