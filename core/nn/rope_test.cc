#include "core/nn/rope.h"

#include <cmath>

#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(RopeTableTest, PlainFrequenciesAndTable) {
  auto rope = *RopeTable::Create({.head_dim = 8, .max_positions = 4, .theta = 10000.0});
  const std::vector<double>& f = rope->inverse_frequencies();
  ASSERT_EQ(f.size(), 4u);
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_NEAR(f[1], 0.1, 1e-15);  // 10000^(-2/8)
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  Tensor t = *rope->On(ctx);
  ASSERT_EQ(t.shape(), (Shape{4, 8}));
  const float* row = t.data<float>() + 3 * 8;  // position 3
  EXPECT_FLOAT_EQ(row[1], std::cos(0.3f));
  EXPECT_FLOAT_EQ(row[4 + 1], std::sin(0.3f));
}

// Llama 3.1's scaling (factor 8, low 1, high 4, original context 8192,
// theta 500000, D 64); expected values from the formula in double, by hand.
TEST(RopeTableTest, Llama3Scaling) {
  auto rope = *RopeTable::Create({.head_dim = 64,
                                  .max_positions = 8,
                                  .theta = 500000.0,
                                  .scaling = {.factor = 8,
                                              .low_freq_factor = 1,
                                              .high_freq_factor = 4,
                                              .original_max_positions = 8192}});
  const std::vector<double>& f = rope->inverse_frequencies();
  EXPECT_DOUBLE_EQ(f[0], 1.0);                               // wavelengths < 2048 stay
  EXPECT_NEAR(f[14], 0.003211445994752591, 1e-15);           // 1956: still unscaled
  EXPECT_NEAR(f[15], 0.0013718935677611381, 1e-15);          // 2948: blended
  EXPECT_NEAR(f[16], 0.0005248461609929547, 1e-15);          // 4443: blended
  EXPECT_NEAR(f[31], 3.767322690173964e-07, 1e-20);          // > 8192: divided by 8
}

TEST(RopeTableTest, RefusesBadConfigs) {
  EXPECT_FALSE(RopeTable::Create({.head_dim = 7}).ok());
  EXPECT_FALSE(RopeTable::Create({.head_dim = 8, .theta = 1.0}).ok());
  const absl::Status missing =
      RopeTable::Create({.head_dim = 8, .scaling = {.factor = 8, .low_freq_factor = 1,
                                                    .high_freq_factor = 4}})
          .status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("original_max_position_embeddings"), std::string::npos)
      << missing;
  EXPECT_FALSE(RopeTable::Create({.head_dim = 8, .scaling = {.factor = 8, .low_freq_factor = 4,
                                                            .high_freq_factor = 1,
                                                            .original_max_positions = 64}})
                   .ok());
}

}  // namespace
}  // namespace weft
