// CPU-vs-CUDA parity for RopeQkvForward / RopeQkvBackward: grouped query
// heads (H = 4, G = 2; H = G = 3; H = 8, G = 1), head sizes 16, 64 and 128
// (vector path) and 12 (scalar path), positions contiguous from an offset
// and in two chunks (a cp rank's zigzag share), and Llama 3 8B's heads
// (H = 32, G = 8, D = 128). Tolerances: f32 1e-5, bf16 1e-2.
#include <cmath>

#include "core/kernels/cuda/parity_util.h"
#include "gtest/gtest.h"

namespace weft::cuda::testing {
namespace {

constexpr int64_t kPositions = 64;

// Row p: cos(p f_i) for i < D/2, then sin(p f_i), f_i = 10000^(-2i/D).
std::vector<float> RopeTable(int64_t d) {
  std::vector<float> t(kPositions * d);
  for (int64_t p = 0; p < kPositions; ++p) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double f = std::pow(10000.0, -2.0 * i / d);
      t[p * d + i] = static_cast<float>(std::cos(p * f));
      t[p * d + d / 2 + i] = static_cast<float>(std::sin(p * f));
    }
  }
  return t;
}

TokenChunks TwoChunks(int64_t len, int64_t second) {
  TokenChunks c;
  c.chunk_len = len;
  c.count = 2;
  c.offsets[0] = 0;
  c.offsets[1] = second;
  return c;
}

struct Heads {
  int64_t h, g, d;
};

void CheckRope(DType dt, const Heads& hd, int64_t b, const TokenChunks& pos) {
  SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " H=" << hd.h << " G=" << hd.g
                                    << " D=" << hd.d << " B=" << b << " chunks " << pos.count
                                    << "x" << pos.chunk_len << " from " << pos.offsets[0]);
  const int64_t t = pos.size(), c = hd.h * hd.d, kc = hd.g * hd.d;
  const Shape q_shape{b, t, c}, kv_shape{b, t, kc}, qkv_shape{b, t, 3 * c};
  const auto q = RoundTo(dt, Random(b * t * c, 1, 2.0f));
  const auto k = RoundTo(dt, Random(b * t * kc, 2, 2.0f));
  const auto v = RoundTo(dt, Random(b * t * kc, 3, 2.0f));
  const auto dqkv = RoundTo(dt, Random(b * t * 3 * c, 4));
  const auto table = RopeTable(hd.d);
  const Shape table_shape{kPositions, hd.d};

  Tensor cqkv = Host(std::vector<float>(b * t * 3 * c), qkv_shape);
  ASSERT_TRUE(CpuOps()
                  .RopeQkvForward(kCpuCtx, cqkv, Host(q, q_shape), Host(k, kv_shape),
                                  Host(v, kv_shape), Host(table, table_shape), pos)
                  .ok());
  Tensor gqkv = GpuZeros(qkv_shape, dt);
  const Tensor gtable = Gpu(table, table_shape, DType::kF32);
  absl::Status st = GpuOps().RopeQkvForward(GpuCtx(), gqkv, Gpu(q, q_shape, dt),
                                            Gpu(k, kv_shape, dt), Gpu(v, kv_shape, dt), gtable,
                                            pos);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(Close(Floats(gqkv), Floats(cqkv), TolFor(dt, false))) << "qkv";

  Tensor cdq = Host(std::vector<float>(b * t * c), q_shape);
  Tensor cdk = Host(std::vector<float>(b * t * kc), kv_shape);
  Tensor cdv = Host(std::vector<float>(b * t * kc), kv_shape);
  ASSERT_TRUE(CpuOps()
                  .RopeQkvBackward(kCpuCtx, cdq, cdk, cdv, Host(dqkv, qkv_shape),
                                   Host(table, table_shape), pos)
                  .ok());
  // Overwritten, not accumulated: start from something else than zero.
  Tensor gdq = Gpu(Random(b * t * c, 5), q_shape, dt);
  Tensor gdk = Gpu(Random(b * t * kc, 6), kv_shape, dt);
  Tensor gdv = Gpu(Random(b * t * kc, 7), kv_shape, dt);
  st = GpuOps().RopeQkvBackward(GpuCtx(), gdq, gdk, gdv, Gpu(dqkv, qkv_shape, dt), gtable, pos);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(Close(Floats(gdq), Floats(cdq), TolFor(dt, false))) << "dq";
  EXPECT_TRUE(Close(Floats(gdk), Floats(cdk), TolFor(dt, false))) << "dk";
  EXPECT_TRUE(Close(Floats(gdv), Floats(cdv), TolFor(dt, false))) << "dv";
}

TEST(RopeQkvParityTest, GroupedHeadsAndPositions) {
  const TokenChunks positions[] = {TokenChunks::Contiguous(5, 7), TwoChunks(3, 9),
                                   TokenChunks::Contiguous(33, 0), TwoChunks(20, 41)};
  const Heads heads[] = {{4, 2, 16}, {3, 3, 16}, {4, 2, 64}, {3, 3, 64},
                         {8, 1, 128}, {4, 2, 12}, {6, 2, 12}};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (const TokenChunks& pos : positions) {
      for (const Heads& hd : heads) CheckRope(dt, hd, 2, pos);
    }
  }
}

TEST(RopeQkvParityTest, Llama3Heads) {
  CheckRope(DType::kBF16, {32, 8, 128}, 2, TokenChunks::Contiguous(64, 0));
}

TEST(RopeQkvParityTest, BadShapesAndPositionsAreErrors) {
  const int64_t d = 16;
  Tensor table = Gpu(RopeTable(d), {kPositions, d}, DType::kF32);
  Tensor q = GpuZeros({1, 4, 4 * d}, DType::kBF16), qkv = GpuZeros({1, 4, 12 * d}, DType::kBF16);
  Tensor k3 = GpuZeros({1, 4, 3 * d}, DType::kBF16);  // 3 K/V heads for 4 query heads
  Tensor k2 = GpuZeros({1, 4, 2 * d}, DType::kBF16), v2 = GpuZeros({1, 4, 2 * d}, DType::kBF16);
  EXPECT_EQ(GpuOps()
                .RopeQkvForward(GpuCtx(), qkv, q, k3, k3, table, TokenChunks::Contiguous(4))
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Positions 62..65 run past the table's 64.
  EXPECT_EQ(GpuOps()
                .RopeQkvForward(GpuCtx(), qkv, q, k2, v2, table, TokenChunks::Contiguous(4, 62))
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Chunks that do not cover T.
  EXPECT_EQ(GpuOps()
                .RopeQkvForward(GpuCtx(), qkv, q, k2, v2, table, TokenChunks::Contiguous(3))
                .code(),
            absl::StatusCode::kInvalidArgument);
  // A bf16 table.
  Tensor bf16_table = Gpu(RopeTable(d), {kPositions, d}, DType::kBF16);
  EXPECT_EQ(GpuOps()
                .RopeQkvForward(GpuCtx(), qkv, q, k2, v2, bf16_table, TokenChunks::Contiguous(4))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      GpuOps().RopeQkvForward(GpuCtx(), qkv, q, k2, v2, table, TokenChunks::Contiguous(4)).ok());
}

}  // namespace
}  // namespace weft::cuda::testing
