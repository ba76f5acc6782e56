// Dropout's random streams: a rank holding a box of a sharded region, or
// zigzag chunks of the sequence (context parallelism), possibly split again
// by sequence parallelism, draws exactly those elements of the
// single-process mask, and the replicated and sharded streams are
// independent.
#include "core/nn/dropout.h"

#include <vector>

#include "core/kernels/kernel_ops.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

Tensor Ones(Shape s) {
  Tensor t = *Tensor::Empty(s, DType::kF32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = 1.f;
  return t;
}

RunContext Ctx() {
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  ctx.dropout_seed = 123;
  return ctx;
}

std::vector<float> Mask(Dropout& d, const Tensor& x) {
  RunContext ctx = Ctx();
  return *d.CallForward(ctx, x)->ToFloats();
}

// A module named like a model's, so both runs hash the same path.
struct Host : Module {
  explicit Host(Dropout::Stream stream) : Module("Host") {
    d = RegisterModule("drop", std::make_unique<Dropout>(0.5f, stream));
  }
  absl::StatusOr<Tensor> Forward(RunContext&, const Tensor& x) override { return x; }
  absl::StatusOr<Tensor> Backward(RunContext&, const Tensor& dy) override { return dy; }
  Dropout* d;
};

TEST(DropoutTest, ShardedBoxesReproduceTheSingleProcessMask) {
  const Shape global = {2, 6, 4};  // (B, T, C); T split 3 ways (sequence parallel)
  Host whole(Dropout::Stream::kSharded);
  const std::vector<float> ref = Mask(*whole.d, Ones(global));
  int dropped = 0;
  for (float v : ref) dropped += v == 0.f;
  EXPECT_GT(dropped, 8);
  EXPECT_LT(dropped, 40);
  for (int r = 0; r < 3; ++r) {
    Host piece(Dropout::Stream::kReplicated);
    piece.d->SetShard({{0, 2 * r, 0}, {2, 2, 4}}, global);
    EXPECT_EQ(piece.d->stream(), Dropout::Stream::kSharded);
    const std::vector<float> got = Mask(*piece.d, Ones({2, 2, 4}));
    for (int b = 0; b < 2; ++b)
      for (int t = 0; t < 2; ++t)
        for (int c = 0; c < 4; ++c)
          ASSERT_EQ(got[(b * 2 + t) * 4 + c], ref[(b * 6 + 2 * r + t) * 4 + c])
              << "rank " << r << " at " << b << "," << t << "," << c;
  }
}

// Rank r of cp holds chunks r and 2cp-1-r of the 2cp chunks of a sequence.
TokenChunks Zigzag(int r, int cp, int64_t seq_len) {
  TokenChunks c;
  c.chunk_len = seq_len / (2 * cp);
  c.count = 2;
  c.offsets[0] = r * c.chunk_len;
  c.offsets[1] = (2 * cp - 1 - r) * c.chunk_len;
  c.seq_len = seq_len;
  return c;
}

TEST(DropoutTest, ZigzagChunksReproduceTheSingleProcessMask) {
  const int64_t b = 2, t = 16, c = 3;
  Host whole(Dropout::Stream::kReplicated);
  const std::vector<float> ref = Mask(*whole.d, Ones({b, t, c}));
  for (int cp : {2, 4}) {
    for (int r = 0; r < cp; ++r) {
      const TokenChunks chunks = Zigzag(r, cp, t);
      // sp splits the rank's tokens again: block k of sp.
      for (int sp : {1, 2, 4}) {
        for (int k = 0; k < sp; ++k) {
          Host piece(Dropout::Stream::kReplicated);
          if (sp > 1) piece.d->SetBlockAlong(1, k, sp);
          RunContext ctx = Ctx();
          ctx.sequence = chunks;
          const int64_t rows = chunks.size() / sp;
          auto got = piece.d->CallForward(ctx, Ones({b, rows, c}));
          ASSERT_TRUE(got.ok()) << got.status();
          const std::vector<float> mask = *got->ToFloats();
          for (int64_t bi = 0; bi < b; ++bi)
            for (int64_t i = 0; i < rows; ++i)
              for (int64_t ci = 0; ci < c; ++ci)
                ASSERT_EQ(mask[(bi * rows + i) * c + ci],
                          ref[(bi * t + chunks.Position(k * rows + i)) * c + ci])
                    << "cp " << cp << " rank " << r << " sp block " << k << " of " << sp
                    << " at " << bi << "," << i << "," << ci;
        }
      }
    }
  }
}

TEST(DropoutTest, SequenceRowsOfZigzagChunks) {
  using Run = SequenceRows::Run;
  // cp2 rank 0 of 8 tokens: chunks [0, 2) and [6, 8).
  auto rows = MapSequenceRows(4, 0, 1, Zigzag(0, 2, 8));
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->runs, (std::vector<Run>{{0, 0, 2}, {2, 6, 2}}));
  EXPECT_EQ(rows->global_rows, 8);
  // The second sp block of those tokens is the second chunk.
  rows = MapSequenceRows(2, 1, 2, Zigzag(0, 2, 8));
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->runs, (std::vector<Run>{{0, 6, 2}}));
  // cp2 rank 1: chunks [2, 4) and [4, 6) touch: one run.
  rows = MapSequenceRows(4, 0, 1, Zigzag(1, 2, 8));
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->runs, (std::vector<Run>{{0, 2, 4}}));
  // Without chunks: an sp block of the whole sequence.
  rows = MapSequenceRows(3, 2, 4, std::nullopt);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->runs, (std::vector<Run>{{0, 6, 3}}));
  EXPECT_EQ(rows->global_rows, 12);
  // Rows that are not the rank's tokens are an error naming both.
  rows = MapSequenceRows(5, 0, 1, Zigzag(0, 2, 8));
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().message().find("5 rows along the sequence on a rank holding 2 chunks of 2"),
            std::string::npos)
      << rows.status();
}

// A replayed CUDA graph reads the step's seed from memory: the same masks as
// the seed passed by value, and the by-value seed is then ignored.
TEST(DropoutTest, StepSeedFromMemoryGivesTheSameMasks) {
  Host by_value(Dropout::Stream::kReplicated), in_memory(Dropout::Stream::kReplicated);
  const Tensor x = Ones({3, 5, 4});
  const std::vector<float> ref = Mask(*by_value.d, x);
  RunContext ctx = Ctx();
  ctx.dropout_seed = 999;  // not used
  ctx.dropout_seed_in_memory = *Tensor::Empty({1}, DType::kI64);
  *static_cast<uint64_t*>(ctx.dropout_seed_in_memory.raw_data()) = 123;
  EXPECT_EQ(*in_memory.d->CallForward(ctx, x)->ToFloats(), ref);
  *static_cast<uint64_t*>(ctx.dropout_seed_in_memory.raw_data()) = 124;
  EXPECT_NE(*in_memory.d->CallForward(ctx, x)->ToFloats(), ref);
}

TEST(DropoutTest, StreamsAreIndependent) {
  Host replicated(Dropout::Stream::kReplicated), sharded(Dropout::Stream::kSharded);
  const Tensor x = Ones({64});
  EXPECT_NE(Mask(*replicated.d, x), Mask(*sharded.d, x));
  Host again(Dropout::Stream::kReplicated);
  EXPECT_EQ(Mask(*replicated.d, x), Mask(*again.d, x));
}

TEST(DropoutTest, ContiguousRunsOfABox) {
  std::vector<std::vector<int64_t>> runs;
  ForEachContiguousRun({{0, 1, 0}, {2, 2, 3}}, {2, 4, 3},
                       [&](int64_t l, int64_t g, int64_t n) { runs.push_back({l, g, n}); });
  // Whole rows of C merge with the T run; one run per batch element.
  EXPECT_EQ(runs, (std::vector<std::vector<int64_t>>{{0, 3, 6}, {6, 15, 6}}));
  runs.clear();
  ForEachContiguousRun({{0, 0}, {3, 5}}, {3, 5},
                       [&](int64_t l, int64_t g, int64_t n) { runs.push_back({l, g, n}); });
  EXPECT_EQ(runs, (std::vector<std::vector<int64_t>>{{0, 0, 15}}));
}

}  // namespace
}  // namespace weft
