// Checkpoint benchmark: `bazel run -c opt //tools/bench:checkpoint`.
//
// GPT-2 124M-shaped training state on CPU (f32 parameters and both AdamW
// moments, 1.49 GB) through the checkpoint package:
//   - synchronous save (GB/s, fsync included) and the same save with
//     --checkpoint_async: the time training is blocked against the write;
//   - load into the same layout, and checksum verification (GB/s);
//   - a resharded load: saved by 4 ranks (flat fsdp shards), loaded as 2
//     tensor-parallel column halves and as 3 uneven flat ranges (zero-2@3),
//     each "rank" reading only its overlapping byte ranges.
// Ranks are threads sharing an in-memory store, writing into --dir.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/loader.h"
#include "comm/store/hash_store.h"
#include "tools/bench/bench_flags.h"

ABSL_FLAG(std::string, dir, "/tmp/weft_checkpoint_bench",
          "A new or empty directory the checkpoints are written in (removed again at the end).");
ABSL_FLAG(int, n_layer, 12, "GPT layers (12: GPT-2 124M).");
ABSL_FLAG(int, d_model, 768, "GPT width.");
ABSL_FLAG(int, vocab, 50304, "Padded vocabulary.");

namespace weft::ckpt {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Param {
  std::string name;
  std::vector<int64_t> shape;
};

std::vector<Param> Gpt2Shapes() {
  const int64_t C = absl::GetFlag(FLAGS_d_model), V = absl::GetFlag(FLAGS_vocab);
  std::vector<Param> p = {{"embed.wte", {V, C}}, {"embed.wpe", {1024, C}}};
  for (int l = 0; l < absl::GetFlag(FLAGS_n_layer); ++l) {
    const std::string b = absl::StrCat("blocks.", l, ".");
    for (const Param& q : std::vector<Param>{{"ln1.weight", {C}}, {"ln1.bias", {C}},
                                             {"attn.qkv.weight", {C, 3 * C}}, {"attn.qkv.bias", {3 * C}},
                                             {"attn.proj.weight", {C, C}}, {"attn.proj.bias", {C}},
                                             {"ln2.weight", {C}}, {"ln2.bias", {C}},
                                             {"mlp.fc.weight", {C, 4 * C}}, {"mlp.fc.bias", {4 * C}},
                                             {"mlp.proj.weight", {4 * C, C}}, {"mlp.proj.bias", {C}}}) {
      p.push_back({b + q.name, q.shape});
    }
  }
  p.push_back({"ln_f.weight", {C}});
  p.push_back({"ln_f.bias", {C}});
  return p;
}

int64_t Numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Rank r of `world` holding a flat range of every entry (value, exp_avg,
// exp_avg_sq), or column block r of 2-D entries when `columns`.
std::vector<StatePiece> Pieces(const std::vector<Param>& params, int r, int world, bool columns,
                               float fill) {
  std::vector<StatePiece> out;
  for (const Param& p : params) {
    for (const char* kind : {"", ":exp_avg", ":exp_avg_sq"}) {
      PieceInfo info;
      info.name = p.name + kind;
      info.global_shape = Shape(p.shape.begin(), p.shape.end());
      info.box_offsets.assign(p.shape.size(), 0);
      info.box_shape = info.global_shape;
      const int64_t n = Numel(p.shape);
      if (columns && p.shape.size() == 2) {
        const int64_t w = p.shape[1] / world;
        info.box_offsets[1] = r * w;
        info.box_shape[1] = w;
        info.begin = 0;
        info.end = p.shape[0] * w;
      } else if (columns) {
        info.begin = 0;
        info.end = n;
        info.replica = r;
      } else {
        info.begin = n * r / world;
        info.end = n * (r + 1) / world;
      }
      Tensor t = *Tensor::Empty({info.end - info.begin}, DType::kF32);
      float* d = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) d[i] = fill + static_cast<float>(i % 1000) * 1e-3f;
      out.push_back({info, t});
    }
  }
  return out;
}

double Bytes(const std::vector<StatePiece>& pieces) {
  double b = 0;
  for (const StatePiece& p : pieces) b += static_cast<double>(p.data.nbytes());
  return b;
}

// Runs fn(rank) on `world` threads; returns the wall time.
template <typename F>
double OnRanks(int world, F fn) {
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&fn, r] { fn(r); });
  for (auto& t : threads) t.join();
  return Seconds(t0);
}

void Check(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
    std::exit(1);
  }
}

SaveRequest Request(int64_t step, const std::vector<StatePiece>& pieces, int rank) {
  static const Stream host = Stream::Default(Device::Cpu());
  SaveRequest r;
  r.step = step;
  r.pieces = &pieces;
  r.stream = &host;
  r.state.set_rank(rank);
  return r;
}

// The benchmark deletes what it wrote, so it writes only where nothing else
// lives: a directory that holds files is refused, never cleared.
bool UsableDir(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return true;
  if (std::filesystem::is_directory(dir, ec) && std::filesystem::is_empty(dir, ec)) return true;
  std::fprintf(stderr,
               "error: --dir=%s exists and is not an empty directory; expected a new or empty "
               "directory, since the benchmark removes it at the end. Hint: pass another --dir, "
               "or remove it if an interrupted run of this benchmark left it\n",
               dir.c_str());
  return false;
}

void Run() {
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const std::vector<Param> params = Gpt2Shapes();
  int64_t n = 0;
  for (const Param& p : params) n += Numel(p.shape);
  std::printf("GPT-2-shaped state: %.1fM parameters x 3 (value, exp_avg, exp_avg_sq) f32 = %.2f GB\n",
              n / 1e6, 12.0 * n / 1e9);

  // Synchronous and async saves from one rank.
  std::vector<StatePiece> one = Pieces(params, 0, 1, false, 1.f);
  const double gb = Bytes(one) / 1e9;
  auto sync = *Checkpointer::Create({.dir = dir + "/sync"});
  Check(sync->Save(Request(1, one, 0)));  // warms the page cache and allocations
  Check(sync->Save(Request(2, one, 0)));
  std::printf("save, sync:   %7.0f ms  %5.2f GB/s (write + fsync + commit)\n",
              sync->last().write_ms, gb / (sync->last().write_ms / 1e3));
  auto async = *Checkpointer::Create({.dir = dir + "/async", .async = true});
  Check(async->Save(Request(1, one, 0)));
  Check(async->Wait());
  Check(async->Save(Request(2, one, 0)));
  const double blocked = async->last_blocked_ms();
  Check(async->Wait());
  std::printf("save, async:  %7.0f ms blocked of %.0f ms total (%.1f%%): training continues "
              "after the copy to host\n",
              blocked, async->last().write_ms, 100.0 * blocked / async->last().write_ms);

  // Load into the same layout, and verify.
  auto ck = *OpenCheckpoint(dir + "/sync/step_2");
  std::vector<StatePiece> into = Pieces(params, 0, 1, false, 0.f);
  const Stream host = Stream::Default(Device::Cpu());
  Clock::time_point t0 = Clock::now();
  LoadStats stats;
  Check(LoadState(ck, into, host, {}, &stats));
  double s = Seconds(t0);
  std::printf("load, same layout: %7.0f ms  %5.2f GB/s\n", s * 1e3, gb / s);
  t0 = Clock::now();
  int64_t checked = 0;
  Check(VerifyChecksums(ck, &checked));
  s = Seconds(t0);
  std::printf("verify:            %7.0f ms  %5.2f GB/s\n", s * 1e3, checked / 1e9 / s);

  // Saved by 4 ranks, loaded by 2 and by 3.
  std::vector<std::vector<StatePiece>> four(4);
  for (int r = 0; r < 4; ++r) four[r] = Pieces(params, r, 4, false, 1.f);
  auto store = std::make_shared<comm::HashStore>(absl::Seconds(120));
  s = OnRanks(4, [&](int r) {
    auto c = *Checkpointer::Create({.dir = dir + "/four", .rank = r, .world_size = 4, .store = store});
    Check(c->Save(Request(3, four[r], r)));
  });
  std::printf("save, 4 ranks (threads, one disk): %7.0f ms  %5.2f GB/s\n", s * 1e3, gb / s);
  auto ck4 = *OpenCheckpoint(dir + "/four/step_3");
  for (auto [label, world, columns] :
       {std::tuple<const char*, int, bool>{"2 column halves (tp2)", 2, true},
        {"3 flat ranges (zero-2@3)", 3, false}}) {
    std::vector<std::vector<StatePiece>> ranks(world);
    for (int r = 0; r < world; ++r) ranks[r] = Pieces(params, r, world, columns, 0.f);
    std::vector<int64_t> read(world);
    s = OnRanks(world, [&](int r) {
      LoadStats st;
      Check(LoadState(ck4, ranks[r], host, {}, &st));
      read[r] = st.bytes_read;
    });
    int64_t total = 0;
    for (int64_t b : read) total += b;
    std::printf("resharded load 4 -> %s: %7.0f ms  %5.2f GB/s, read %.2f GB (%.2fx the state)\n",
                label, s * 1e3, total / 1e9 / s, total / 1e9, total / 1e9 / gb);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace weft::ckpt

int main(int argc, char** argv) {
  weft::bench::ParseBenchmarkFlags(
      argc, argv,
      "Times sharded checkpoint saves (sync and async) and resharded loads of GPT-2-shaped\n"
      "state on this machine.\nusage: checkpoint [--dir=NEW_DIR] [--n_layer=N] [--d_model=C]");
  weft::bench::RequireFlag(absl::GetFlag(FLAGS_n_layer) >= 1 && absl::GetFlag(FLAGS_d_model) >= 1 &&
                               absl::GetFlag(FLAGS_vocab) >= 1,
                           absl::StrCat("n_layer=", absl::GetFlag(FLAGS_n_layer), " --d_model=",
                                        absl::GetFlag(FLAGS_d_model), " --vocab=",
                                        absl::GetFlag(FLAGS_vocab)),
                           "positive sizes");
  if (!weft::ckpt::UsableDir(absl::GetFlag(FLAGS_dir))) return 2;
  weft::ckpt::Run();
  return 0;
}
