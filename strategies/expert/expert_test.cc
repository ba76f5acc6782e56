// expert's checks on the mesh and options: ep must divide dp_shard (cp
// beside it is fine), ep > 1 needs ranks. (Experts not divisible by ep and top_k >
// num_experts are checked with a model: tests/parity_expert_test.cc and
// core/nn/moe_test.cc.)
#include "strategies/expert/expert.h"

#include "comm/device_mesh/mesh_layout.h"
#include "core/parallel/strategy_options.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

StrategyOptionSet Options(const ExpertStrategy& s, int ep) {
  StrategyOptionValues v;
  v.given["ep"] = std::to_string(ep);
  return (*ResolveStrategyOptions({&s}, v))[0];
}

TEST(ExpertValidateTest, EpMustDivideDpShard) {
  ExpertStrategy s;
  auto mesh = *comm::MeshLayout::Create({{"dp_replicate", 1}, {"dp_shard", 6}, {"cp", 1}}, 6);
  EXPECT_TRUE(s.Validate(Options(s, 3), &mesh).ok());
  absl::Status st = s.Validate(Options(s, 4), &mesh);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("ep=4 does not divide dp_shard=6"), std::string::npos) << st;
  EXPECT_NE(st.message().find("divisors of 6"), std::string::npos) << st;
}

TEST(ExpertValidateTest, AcceptsCpRefusesSingleProcessEp) {
  ExpertStrategy s;
  // ep along dp_shard at each cp position (tests/parity_cp_moe_test).
  auto cp = *comm::MeshLayout::Create({{"dp_shard", 2}, {"cp", 2}}, 4);
  EXPECT_TRUE(s.Validate(Options(s, 2), &cp).ok());
  EXPECT_EQ(s.Validate(Options(s, 2), nullptr).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(s.Validate(Options(s, 1), nullptr).ok());
  EXPECT_FALSE(s.Validate(Options(s, 0), nullptr).ok());
}

}  // namespace
}  // namespace weft
