#include "strategies/zero/zero.h"

#include "core/parallel/strategy_options.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

comm::MeshLayout Mesh() {
  return *comm::MeshLayout::Create({{"dp_replicate", 1}, {"dp_shard", 4}}, 4);
}

absl::StatusOr<StrategyOptionSet> Options(const Strategy& s,
                                          std::map<std::string, std::string> given) {
  absl::StatusOr<std::vector<StrategyOptionSet>> sets =
      ResolveStrategyOptions({&s}, {.given = std::move(given)});
  if (!sets.ok()) return sets.status();
  return (*sets)[0];
}

TEST(ZeroValidateTest, StagesOneToThreeOnly) {
  ZeroStrategy z;
  comm::MeshLayout mesh = Mesh();
  for (const char* stage : {"1", "2", "3"}) {
    EXPECT_TRUE(z.Validate(*Options(z, {{"zero_stage", stage}}), &mesh).ok()) << stage;
  }
  absl::Status s = z.Validate(*Options(z, {{"zero_stage", "4"}}), &mesh);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("zero_stage=4"), std::string::npos);
  EXPECT_NE(s.message().find("never falls back"), std::string::npos);
  EXPECT_FALSE(z.Validate(*Options(z, {{"zero_stage", "0"}}), &mesh).ok());
}

TEST(ZeroValidateTest, BadOptions) {
  ZeroStrategy z;
  comm::MeshLayout mesh = Mesh();
  EXPECT_FALSE(z.Validate(*Options(z, {{"bucket_mb", "0"}}), &mesh).ok());
  absl::Status s = Options(z, {{"reduce_dtype", "f8"}}).status();
  EXPECT_NE(s.message().find("one of: auto, f32, bf16"), std::string::npos) << s;
  EXPECT_FALSE(z.Validate(*Options(z, {}), nullptr).ok());
}

TEST(ZeroOptionsTest, DefaultsAndTypes) {
  ZeroStrategy z;
  StrategyOptionSet o = *Options(z, {});
  EXPECT_EQ(o.GetInt("zero_stage"), 1);
  EXPECT_EQ(o.GetDouble("bucket_mb"), 25);
  EXPECT_EQ(o.GetEnum("reduce_dtype"), "auto");
  EXPECT_EQ(o.GetString("zero3_wrap"), "TransformerBlock|Linear");
  absl::Status s = Options(z, {{"zero_stage", "two"}}).status();
  EXPECT_NE(s.message().find("zero.zero_stage='two'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("type int"), std::string::npos) << s;
}

}  // namespace
}  // namespace weft
