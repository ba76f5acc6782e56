#include "core/base/errors.h"

#include "core/base/check.h"
#include "core/base/status_macros.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(ErrorsTest, MessageHasWhatExpectedAndHint) {
  absl::Status s = InvalidArgument("n_head=5 does not divide d_model=64", "a divisor of 64",
                                   "try n_head=4 or 8");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "n_head=5 does not divide d_model=64; expected a divisor of 64. Hint: try n_head=4 or 8");
}

TEST(ErrorsTest, EmptyPartsAreLeftOut) {
  EXPECT_EQ(Internal("boom").message(), "boom");
}

TEST(ErrorsTest, AnnotatePrefixesAndKeepsCode) {
  absl::Status s = Annotate(NotFound("no file", "a file"), "loading shard 3");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "loading shard 3: no file; expected a file");
  EXPECT_TRUE(Annotate(absl::OkStatus(), "x").ok());
}

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd", "even");
  return x / 2;
}

absl::Status QuarterInto(int x, int* out) {
  WEFT_ASSIGN_OR_RETURN(int h, Half(x));
  WEFT_ASSIGN_OR_RETURN(*out, Half(h));
  return absl::OkStatus();
}

TEST(StatusMacrosTest, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(QuarterInto(8, &out).ok());
  EXPECT_EQ(out, 2);
  EXPECT_EQ(QuarterInto(6, &out).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CheckDeathTest, CheckAbortsWithMessage) {
  EXPECT_DEATH({ WEFT_CHECK_EQ(1, 2) << "context"; }, "check failed.*context");
}

}  // namespace
}  // namespace weft
