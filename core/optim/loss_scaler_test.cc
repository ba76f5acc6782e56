#include "core/optim/loss_scaler.h"

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "core/optim/f16_rounding.h"
#include "core/testing/grad_check.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

LossScaler Dynamic(float init, int64_t interval) {
  return *LossScaler::Create({.dynamic = true, .init_scale = init, .growth_interval = interval});
}

TEST(LossScalerTest, DefaultsAreGradScalers) {
  const LossScaler s = *LossScaler::Create({});
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.config().growth_factor, 2.0);
  EXPECT_EQ(s.config().backoff_factor, 0.5);
  EXPECT_EQ(s.config().growth_interval, 2000);
  EXPECT_EQ(s.inverse_scale(), 1.0f / 65536.0f);
}

TEST(LossScalerTest, GrowsAfterIntervalCleanStepsInARow) {
  LossScaler s = Dynamic(8.0f, 3);
  EXPECT_FALSE(s.Update(false));
  EXPECT_FALSE(s.Update(false));
  EXPECT_EQ(s.scale(), 8.0f);
  EXPECT_EQ(s.state().growth_tracker, 2);
  EXPECT_FALSE(s.Update(false));  // the third clean step grows
  EXPECT_EQ(s.scale(), 16.0f);
  EXPECT_EQ(s.state().growth_tracker, 0);
  for (int i = 0; i < 3; ++i) s.Update(false);
  EXPECT_EQ(s.scale(), 32.0f);
}

TEST(LossScalerTest, AnOverflowSkipsBacksOffAndRestartsTheCount) {
  LossScaler s = Dynamic(1024.0f, 3);
  s.Update(false);
  s.Update(false);
  EXPECT_TRUE(s.Update(true));
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_EQ(s.state().growth_tracker, 0);
  // Several in a row halve every time.
  EXPECT_TRUE(s.Update(true));
  EXPECT_TRUE(s.Update(true));
  EXPECT_EQ(s.scale(), 128.0f);
  // Two clean steps after the overflow do not grow yet; the third does.
  s.Update(false);
  s.Update(false);
  EXPECT_EQ(s.scale(), 128.0f);
  s.Update(false);
  EXPECT_EQ(s.scale(), 256.0f);
}

TEST(LossScalerTest, GrowthStopsShortOfF32Overflow) {
  LossScaler s = Dynamic(std::ldexp(1.0f, 127), 1);
  EXPECT_FALSE(s.Update(false));
  EXPECT_EQ(s.scale(), std::ldexp(1.0f, 127));  // 2^128 is inf in f32: kept
  EXPECT_EQ(s.state().growth_tracker, 0);
}

TEST(LossScalerTest, BackoffRoundsLikeATenInF32) {
  // f32 scale times a double factor, back to f32: 3 * 0.3 rounds once.
  LossScaler s = *LossScaler::Create({.init_scale = 3.0f, .backoff_factor = 0.3});
  s.Update(true);
  EXPECT_EQ(s.scale(), static_cast<float>(3.0 * 0.3));
  // Without a clamp, it keeps going toward 0 (f32 subnormals, then 0).
  LossScaler t = Dynamic(1.0f, 10);
  for (int i = 0; i < 149; ++i) t.Update(true);
  EXPECT_EQ(t.scale(), std::ldexp(1.0f, -149));
  t.Update(true);
  EXPECT_EQ(t.scale(), 0.0f);
}

TEST(LossScalerTest, StaticScaleNeverChangesButSkipsOverflows) {
  LossScaler s = *LossScaler::Create({.dynamic = false, .init_scale = 1000.0f});
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(s.Update(false));
  EXPECT_TRUE(s.Update(true));
  EXPECT_TRUE(s.Update(true));
  EXPECT_EQ(s.scale(), 1000.0f);
  EXPECT_EQ(s.state().growth_tracker, 0);
  // A checkpoint's dynamic state does not move a static scale.
  ASSERT_TRUE(s.Restore({.scale = 8.0f, .growth_tracker = 1}).ok());
  EXPECT_EQ(s.scale(), 1000.0f);
  EXPECT_EQ(s.Describe(), "static 1000");
}

TEST(LossScalerTest, RestoreContinuesWhereTheStateWas) {
  LossScaler a = Dynamic(64.0f, 3);
  a.Update(true);
  a.Update(false);
  a.Update(false);
  LossScaler b = Dynamic(64.0f, 3);
  ASSERT_TRUE(b.Restore(a.state()).ok());
  EXPECT_EQ(b.scale(), 32.0f);
  b.Update(false);  // the third clean step after the backoff
  EXPECT_EQ(b.scale(), 64.0f);
  // A count past a shorter interval grows at the next clean step.
  LossScaler c = Dynamic(64.0f, 2);
  ASSERT_TRUE(c.Restore({.scale = 4.0f, .growth_tracker = 5}).ok());
  EXPECT_EQ(c.state().growth_tracker, 1);
  c.Update(false);
  EXPECT_EQ(c.scale(), 8.0f);
  EXPECT_FALSE(c.Restore({.scale = NAN, .growth_tracker = 0}).ok());
  EXPECT_FALSE(c.Restore({.scale = 1.0f, .growth_tracker = -1}).ok());
}

TEST(LossScalerTest, BadConfigsNameTheirFlag) {
  struct Case {
    LossScalerConfig config;
    const char* flag;
  };
  const std::vector<Case> cases = {
      {{.init_scale = 0.0f}, "--loss_scale_init"},
      {{.init_scale = INFINITY}, "--loss_scale_init"},
      {{.dynamic = false, .init_scale = -1.0f}, "--loss_scale="},
      {{.growth_factor = 1.0}, "--loss_scale_growth_factor"},
      {{.growth_factor = NAN}, "--loss_scale_growth_factor"},
      {{.backoff_factor = 1.0}, "--loss_scale_backoff"},
      {{.backoff_factor = 0.0}, "--loss_scale_backoff"},
      {{.growth_interval = 0}, "--loss_scale_growth_interval"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<LossScaler> s = LossScaler::Create(c.config);
    ASSERT_FALSE(s.ok()) << c.flag;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(c.flag), std::string::npos) << s.status();
  }
}

TEST(F16RoundingTest, RoundsToNearestFp16AndOverflowsToInf) {
  EXPECT_EQ(RoundToF16(1.0f), 1.0f);
  EXPECT_EQ(RoundToF16(65504.0f), 65504.0f);    // fp16's largest finite
  EXPECT_EQ(RoundToF16(65519.0f), 65504.0f);    // still rounds down
  EXPECT_EQ(RoundToF16(65520.0f), INFINITY);    // the halfway point rounds to inf
  EXPECT_EQ(RoundToF16(-1e6f), -INFINITY);
  EXPECT_TRUE(std::isnan(RoundToF16(NAN)));
  EXPECT_EQ(RoundToF16(1.0f + std::ldexp(1.0f, -11)), 1.0f);  // tie to even
  EXPECT_EQ(RoundToF16(1.0f + std::ldexp(1.0f, -10)), 1.0f + std::ldexp(1.0f, -10));
  EXPECT_EQ(RoundToF16(std::ldexp(1.0f, -24)), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(RoundToF16(std::ldexp(1.0f, -26)), 0.0f);                   // flushed
  Tensor t = ::weft::testing::FilledTensor({3}, 0.1f);
  ASSERT_TRUE(RoundToF16InPlace(t).ok());
  const std::vector<float> rounded = *t.ToFloats();
  for (float v : rounded) EXPECT_EQ(v, RoundToF16(0.1f));
  EXPECT_NE(RoundToF16(0.1f), 0.1f);
  Tensor bf = *t.ToDType(DType::kBF16);
  EXPECT_FALSE(RoundToF16InPlace(bf).ok());
}

}  // namespace
}  // namespace weft
