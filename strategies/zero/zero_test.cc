#include "strategies/zero/zero.h"

#include "gtest/gtest.h"

namespace weft {
namespace {

comm::MeshLayout Mesh() {
  return *comm::MeshLayout::Create({{"dp_replicate", 1}, {"dp_shard", 4}}, 4);
}

TEST(ZeroValidateTest, StagesOneToThreeOnly) {
  ZeroStrategy z;
  comm::MeshLayout mesh = Mesh();
  StrategyOptions o;
  for (int stage : {1, 2, 3}) {
    o.zero_stage = stage;
    EXPECT_TRUE(z.Validate(o, &mesh).ok()) << stage;
  }
  o.zero_stage = 4;
  absl::Status s = z.Validate(o, &mesh);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("zero_stage=4"), std::string::npos);
  EXPECT_NE(s.message().find("never falls back"), std::string::npos);
  o.zero_stage = 0;
  EXPECT_FALSE(z.Validate(o, &mesh).ok());
}

TEST(ZeroValidateTest, BadOptions) {
  ZeroStrategy z;
  comm::MeshLayout mesh = Mesh();
  StrategyOptions o;
  o.bucket_mb = 0;
  EXPECT_FALSE(z.Validate(o, &mesh).ok());
  o = StrategyOptions();
  o.reduce_dtype = "f8";
  EXPECT_NE(z.Validate(o, &mesh).message().find("f32 or bf16"), std::string::npos);
  EXPECT_FALSE(z.Validate(StrategyOptions(), nullptr).ok());
}

}  // namespace
}  // namespace weft
