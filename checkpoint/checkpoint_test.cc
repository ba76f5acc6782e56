// The checkpoint format on its own: pieces in, pieces out, with ranks as
// threads sharing an in-memory store. The trainer-level tests (bitwise
// resume, resharding across strategies, crashes mid-save) are in tests/.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/layout.h"
#include "checkpoint/loader.h"
#include "comm/store/hash_store.h"
#include "gtest/gtest.h"

namespace weft::ckpt {
namespace {

namespace fs = std::filesystem;

std::string FreshDir(const std::string& name) {
  const std::string d = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  fs::remove_all(d);
  return d;
}

std::vector<float> Iota(int64_t n, float base) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = base + 0.25f * static_cast<float>(i);
  return v;
}

// Elements [begin, end) of a whole-tensor box of `full`.
StatePiece FlatPiece(const std::string& name, const std::vector<int64_t>& shape,
                     const std::vector<float>& full, int64_t begin, int64_t end, int replica = 0) {
  PieceInfo info;
  info.name = name;
  info.global_shape = Shape(shape.begin(), shape.end());
  info.box_offsets.assign(shape.size(), 0);
  info.box_shape = info.global_shape;
  info.begin = begin;
  info.end = end;
  info.replica = replica;
  std::vector<float> part(full.begin() + begin, full.begin() + end);
  return {info, *Tensor::FromFloats(part, {end - begin})};
}

// A column block [c0, c0 + w) of a 2-D tensor (a tensor-parallel shard).
StatePiece ColumnPiece(const std::string& name, int64_t rows, int64_t cols, int64_t c0, int64_t w) {
  PieceInfo info;
  info.name = name;
  info.global_shape = {rows, cols};
  info.box_offsets = {0, c0};
  info.box_shape = {rows, w};
  info.begin = 0;
  info.end = rows * w;
  return {info, *Tensor::Zeros({rows * w}, DType::kF32)};
}

SaveRequest Request(int64_t step, const std::vector<StatePiece>& pieces, int rank = 0) {
  static const Stream host = Stream::Default(Device::Cpu());
  SaveRequest r;
  r.step = step;
  r.pieces = &pieces;
  r.stream = &host;
  r.state.set_rank(rank);
  r.state.set_step(step);
  r.state.set_train_loader("weft-loader-state v1 epoch=0 batch=3");
  r.job_config = "steps: 10";
  r.optimizer = "adamw";
  return r;
}

// Saves `per_rank[r]` from `per_rank.size()` ranks (threads) at `step`.
void SaveFromRanks(const std::string& dir, int64_t step,
                   const std::vector<std::vector<StatePiece>>& per_rank, int64_t chunk_bytes = 64) {
  auto store = std::make_shared<comm::HashStore>(absl::Seconds(20));
  const int world = static_cast<int>(per_rank.size());
  std::vector<absl::Status> status(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto c = Checkpointer::Create({.dir = dir, .rank = r, .world_size = world, .store = store,
                                     .timeout = absl::Seconds(20), .chunk_bytes = chunk_bytes});
      status[r] = c.ok() ? (*c)->Save(Request(step, per_rank[r], r)) : c.status();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
}

std::vector<float> Values(const StatePiece& p) { return *p.data.ToFloats(); }

TEST(CheckpointTest, SavesAndLoadsExactlyWithTheMetadataItNeeds) {
  const std::string dir = FreshDir("roundtrip");
  const std::vector<float> w = Iota(24, -3.f), m = Iota(24, 7.f);
  std::vector<StatePiece> saved = {FlatPiece("w", {4, 6}, w, 0, 24),
                                   FlatPiece("w:exp_avg", {4, 6}, m, 0, 24)};
  SaveFromRanks(dir, 5, {saved});
  auto latest = ResolveResume(dir, "latest");
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, dir + "/step_5");
  EXPECT_EQ(ResolveResume(dir, "auto").value_or("?"), dir + "/step_5");
  auto ckpt = OpenCheckpoint(*latest);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->meta.step(), 5);
  EXPECT_EQ(ckpt->meta.world_size(), 1);
  EXPECT_EQ(ckpt->meta.optimizer(), "adamw");
  EXPECT_EQ(ckpt->meta.job_config(), "steps: 10");
  ASSERT_EQ(ckpt->meta.ranks_size(), 1);
  EXPECT_EQ(ckpt->meta.ranks(0).train_loader(), "weft-loader-state v1 epoch=0 batch=3");
  ASSERT_EQ(ckpt->meta.entries_size(), 2);
  EXPECT_EQ(ckpt->meta.entries(0).pieces(0).chunk_crc32c_size(), 2);  // 96 bytes, 64-byte chunks

  std::vector<StatePiece> into = {FlatPiece("w", {4, 6}, std::vector<float>(24), 0, 24),
                                  FlatPiece("w:exp_avg", {4, 6}, std::vector<float>(24), 0, 24)};
  LoadStats stats;
  ASSERT_TRUE(LoadState(*ckpt, into, Stream::Default(Device::Cpu()), {}, &stats).ok());
  EXPECT_EQ(Values(into[0]), w);
  EXPECT_EQ(Values(into[1]), m);
  EXPECT_EQ(stats.elements_loaded, 48);
  int64_t checked = 0;
  EXPECT_TRUE(VerifyChecksums(*ckpt, &checked).ok());
  EXPECT_EQ(checked, 2 * 24 * 4);
}

TEST(CheckpointTest, ReshardsFlatShardsOfFourRanksIntoColumnBlocksAndUnevenRanges) {
  const std::string dir = FreshDir("reshard");
  const std::vector<float> w = Iota(6 * 8, 1.f);
  // Four ranks each hold a quarter of the flat tensor (fsdp-like), and two
  // of them also hold replica copies that must not be needed.
  std::vector<std::vector<StatePiece>> ranks(4);
  for (int r = 0; r < 4; ++r) ranks[r].push_back(FlatPiece("w", {6, 8}, w, 12 * r, 12 * (r + 1)));
  ranks[1].push_back(FlatPiece("w:exp_avg", {6, 8}, w, 0, 48));
  ranks[3].push_back(FlatPiece("w:exp_avg", {6, 8}, w, 0, 48, /*replica=*/1));
  SaveFromRanks(dir, 2, ranks);
  auto ckpt = OpenCheckpoint(dir + "/step_2");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->meta.world_size(), 4);

  // Two tensor-parallel column blocks.
  for (int64_t c0 : {0, 4}) {
    std::vector<StatePiece> local = {ColumnPiece("w", 6, 8, c0, 4), ColumnPiece("w:exp_avg", 6, 8, c0, 4)};
    LoadStats stats;
    ASSERT_TRUE(LoadState(*ckpt, local, Stream::Default(Device::Cpu()), {}, &stats).ok());
    std::vector<float> expect;
    for (int64_t r = 0; r < 6; ++r) {
      for (int64_t c = c0; c < c0 + 4; ++c) expect.push_back(w[r * 8 + c]);
    }
    EXPECT_EQ(Values(local[0]), expect);
    EXPECT_EQ(Values(local[1]), expect);
  }
  // Three uneven flat ranges (zero-2 on 3 ranks): only the overlapping
  // chunks are read.
  for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 16}, {16, 32}, {32, 48}}) {
    std::vector<StatePiece> local = {FlatPiece("w", {6, 8}, std::vector<float>(48), b, e)};
    LoadStats stats;
    ASSERT_TRUE(LoadState(*ckpt, local, Stream::Default(Device::Cpu()), {.weights_only = true}, &stats).ok());
    EXPECT_EQ(Values(local[0]), std::vector<float>(w.begin() + b, w.begin() + e));
    EXPECT_LT(stats.bytes_read, 48 * 4);
  }
}

TEST(CheckpointTest, CorruptAndTruncatedFilesNameTheEntryAndFile) {
  const std::string dir = FreshDir("corrupt");
  const std::vector<float> w = Iota(64, 0.f);
  std::vector<StatePiece> saved = {FlatPiece("blocks.0.mlp.fc.weight", {8, 8}, w, 0, 64)};
  SaveFromRanks(dir, 1, {saved});
  const std::string file = dir + "/step_1/" + RankFileName(0);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(kRankFileHeaderBytes + 100);
    f.put('\x7f');
  }
  auto ckpt = OpenCheckpoint(dir + "/step_1");
  ASSERT_TRUE(ckpt.ok());
  std::vector<StatePiece> into = {FlatPiece("blocks.0.mlp.fc.weight", {8, 8}, std::vector<float>(64), 0, 64)};
  absl::Status s = LoadState(*ckpt, into, Stream::Default(Device::Cpu()), {}, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("blocks.0.mlp.fc.weight"), std::string::npos) << s;
  EXPECT_NE(s.message().find("checksum mismatch in rank_00000.bin"), std::string::npos) << s;
  EXPECT_EQ(VerifyChecksums(*ckpt, nullptr).code(), absl::StatusCode::kDataLoss);

  fs::resize_file(file, kRankFileHeaderBytes + 40);
  s = LoadState(*ckpt, into, Stream::Default(Device::Cpu()), {}, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s;
  EXPECT_NE(s.message().find("blocks.0.mlp.fc.weight"), std::string::npos) << s;

  std::ofstream(dir + "/step_1/metadata.pb", std::ios::trunc) << "garbage";
  EXPECT_EQ(OpenCheckpoint(dir + "/step_1").status().code(), absl::StatusCode::kInvalidArgument);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A flipped bit in metadata.pb (here the loader position "batch=3" becomes
// "batch=2") used to open as a valid checkpoint that resumes elsewhere in
// the data; the file's own CRC-32C makes it an error naming the file.
TEST(CheckpointTest, CorruptMetadataIsAChecksumErrorNotAnotherPosition) {
  const std::string dir = FreshDir("corrupt_metadata");
  const std::vector<float> w = Iota(16, 1.f);
  SaveFromRanks(dir, 2, {{FlatPiece("w", {4, 4}, w, 0, 16)}});
  const std::string path = dir + "/step_2/metadata.pb";
  const std::string good = ReadAll(path);
  ASSERT_TRUE(OpenCheckpoint(dir + "/step_2").ok());

  std::string bad = good;
  const size_t at = bad.find("batch=3");
  ASSERT_NE(at, std::string::npos);
  bad[at + 6] ^= 1;  // '3' -> '2'
  WriteAll(path, bad);
  auto ckpt = OpenCheckpoint(dir + "/step_2");
  ASSERT_FALSE(ckpt.ok()) << "opened with train_loader " << ckpt->meta.ranks(0).train_loader();
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kDataLoss) << ckpt.status();
  EXPECT_NE(ckpt.status().message().find("metadata.pb: checksum mismatch"), std::string::npos)
      << ckpt.status();

  // The checksum itself damaged: the same error.
  bad = good;
  bad.back() ^= 0x10;
  WriteAll(path, bad);
  EXPECT_EQ(OpenCheckpoint(dir + "/step_2").status().code(), absl::StatusCode::kDataLoss);

  // Metadata written before the checksum existed still opens.
  Metadata old;
  ASSERT_TRUE(old.ParseFromString(good));
  ASSERT_TRUE(old.has_metadata_crc32c());
  old.clear_metadata_crc32c();
  WriteAll(path, old.SerializeAsString());
  ckpt = OpenCheckpoint(dir + "/step_2");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->meta.ranks(0).train_loader(), "weft-loader-state v1 epoch=0 batch=3");
}

TEST(CheckpointTest, ADifferentModelIsRejectedWithTheNamesThatDiffer) {
  const std::string dir = FreshDir("mismatch");
  const std::vector<float> w = Iota(12, 0.f);
  std::vector<StatePiece> saved = {FlatPiece("a", {3, 4}, w, 0, 12), FlatPiece("b", {3, 4}, w, 0, 12),
                                   FlatPiece("a:exp_avg", {3, 4}, w, 0, 12)};
  SaveFromRanks(dir, 1, {saved});
  auto ckpt = OpenCheckpoint(dir + "/step_1");
  ASSERT_TRUE(ckpt.ok());
  std::vector<StatePiece> other = {FlatPiece("a", {4, 3}, w, 0, 12), FlatPiece("c", {3, 4}, w, 0, 12)};
  const std::set<std::string> job = {"a", "c"};
  absl::Status s = LoadState(*ckpt, other, Stream::Default(Device::Cpu()), {.job_entries = &job}, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("not in the checkpoint: c"), std::string::npos) << s;
  EXPECT_NE(s.message().find("only in the checkpoint: a:exp_avg, b"), std::string::npos) << s;
  EXPECT_NE(s.message().find("a [3,4] in the checkpoint, [4,3] here"), std::string::npos) << s;
}

// Only the optimizer state differs (adamw saved, sgd resumes): named as
// another optimizer, with the flag and the way to keep only the weights.
TEST(CheckpointTest, AnotherOptimizerIsNamedAsOne) {
  const std::string dir = FreshDir("optimizer");
  const std::vector<float> w = Iota(4, 0.f);
  SaveFromRanks(dir, 1, {{FlatPiece("w", {4}, w, 0, 4), FlatPiece("w:exp_avg", {4}, w, 0, 4),
                          FlatPiece("w:exp_avg_sq", {4}, w, 0, 4)}});
  auto ckpt = OpenCheckpoint(dir + "/step_1");
  ASSERT_TRUE(ckpt.ok());
  std::vector<StatePiece> sgd = {FlatPiece("w", {4}, w, 0, 4), FlatPiece("w:exp_avg", {4}, w, 0, 4)};
  const std::set<std::string> job = {"w", "w:exp_avg"};
  absl::Status s = LoadState(*ckpt, sgd, Stream::Default(Device::Cpu()), {.job_entries = &job}, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("holds the state of optimizer 'adamw'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--optim.name=adamw"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--init_from=FILE"), std::string::npos) << s;
}

TEST(CheckpointTest, OverlappingReplicaZeroPiecesFailTheSaveOnEveryRank) {
  const std::string dir = FreshDir("overlap");
  const std::vector<float> w = Iota(8, 0.f);
  auto store = std::make_shared<comm::HashStore>(absl::Seconds(20));
  std::vector<absl::Status> status(2);
  std::vector<std::vector<StatePiece>> ranks = {{FlatPiece("w", {8}, w, 0, 6)}, {FlatPiece("w", {8}, w, 4, 8)}};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto c = Checkpointer::Create({.dir = dir, .rank = r, .world_size = 2, .store = store,
                                     .timeout = absl::Seconds(20)});
      status[r] = (*c)->Save(Request(3, ranks[r], r));
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(status[r].ok());
    EXPECT_NE(status[r].message().find("overlap at element 4"), std::string::npos) << status[r];
  }
  EXPECT_TRUE(ListCheckpoints(dir)->empty()) << "nothing committed";
}

TEST(CheckpointTest, LeftoversAreCleanedAndKeepLastPrunes) {
  const std::string dir = FreshDir("prune");
  fs::create_directories(dir + "/step_9.tmp");
  fs::create_directories(dir + "/step_4.old");
  std::ofstream(dir + "/step_9.tmp/rank_00000.bin") << "half";
  const std::vector<float> w = Iota(4, 0.f);
  std::vector<StatePiece> pieces = {FlatPiece("w", {4}, w, 0, 4)};
  auto c = Checkpointer::Create({.dir = dir, .keep_last = 2});
  ASSERT_TRUE(c.ok());
  for (int64_t step : {10, 20, 30}) ASSERT_TRUE((*c)->Save(Request(step, pieces)).ok());
  auto all = ListCheckpoints(dir);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].step, 20);
  EXPECT_EQ((*all)[1].step, 30);
  EXPECT_FALSE(fs::exists(dir + "/step_9.tmp"));
  EXPECT_FALSE(fs::exists(dir + "/step_4.old"));
  EXPECT_FALSE(fs::exists(dir + "/step_10"));
}

TEST(CheckpointTest, AsyncSaveReturnsAfterTheCopyAndLaterChangesDoNotLeakIn) {
  const std::string dir = FreshDir("async");
  std::vector<float> w = Iota(1 << 16, 0.f);
  std::vector<StatePiece> pieces = {FlatPiece("w", {1 << 16}, w, 0, 1 << 16)};
  auto c = Checkpointer::Create({.dir = dir, .async = true});
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Save(Request(7, pieces)).ok());
  // Training goes on and changes the state while the write runs.
  ASSERT_TRUE(pieces[0].data.Zero().ok());
  ASSERT_TRUE((*c)->Wait().ok());
  EXPECT_EQ((*c)->last().step, 7);
  EXPECT_GE((*c)->last().write_ms, (*c)->last().blocked_ms);
  EXPECT_GT((*c)->last().bytes, (1 << 16) * 4);
  auto ckpt = OpenCheckpoint(dir + "/step_7");
  ASSERT_TRUE(ckpt.ok());
  auto full = ReadFullTensors(*ckpt, nullptr);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->at("w").values, w);
}

// A background write that fails is reported at the next save: the error
// names the step whose save failed, not the step reporting it.
TEST(CheckpointTest, AFailedAsyncSaveNamesItsOwnStep) {
  const std::string dir = FreshDir("async_fail");
  std::vector<float> w = Iota(64, 0.f);
  std::vector<StatePiece> pieces = {FlatPiece("w", {64}, w, 0, 64)};
  auto c = Checkpointer::Create({.dir = dir, .async = true});
  ASSERT_TRUE(c.ok());
  // The directory becomes a file: step 4's write cannot create step_4.tmp/.
  fs::remove_all(dir);
  { std::ofstream(dir) << "not a directory"; }
  ASSERT_TRUE((*c)->Save(Request(4, pieces)).ok());  // returns after the copy
  absl::Status s = (*c)->Save(Request(6, pieces));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("the asynchronous save of step 4: "), std::string::npos) << s;
  fs::remove(dir);
}

TEST(CheckpointTest, ResumeWithoutACheckpointSaysWhatWasSearched) {
  const std::string dir = FreshDir("empty");
  absl::StatusOr<std::string> r = ResolveResume(dir, "latest");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(dir), std::string::npos);
  EXPECT_EQ(ResolveResume(dir, dir + "/step_3").status().code(), absl::StatusCode::kNotFound);
  // "auto" starts a new run there instead (a preemptible job's first start).
  EXPECT_EQ(ResolveResume(dir, "auto").value_or("?"), "");
  EXPECT_EQ(ResolveResume("", "auto").status().code(), absl::StatusCode::kInvalidArgument);
}

// --resume=<a run's checkpoint directory> names it as one and gives the
// newest step; the hint was to list the steps with ckpt inspect, which shows
// only the newest.
TEST(CheckpointTest, ResumeFromARunDirectoryNamesItsNewestStep) {
  const std::string dir = FreshDir("run_dir");
  SaveFromRanks(dir, 2, {{FlatPiece("w", {4}, Iota(4, 0.f), 0, 4)}});
  SaveFromRanks(dir, 4, {{FlatPiece("w", {4}, Iota(4, 1.f), 0, 4)}});
  absl::StatusOr<std::string> r = ResolveResume("", dir);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  EXPECT_NE(r.status().message().find("is a directory of 2 checkpoint(s)"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find(absl::StrCat("--resume=", dir, "/step_4")),
            std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace weft::ckpt
