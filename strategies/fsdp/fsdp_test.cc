#include "strategies/fsdp/fsdp.h"

#include "core/parallel/strategy_options.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(FsdpValidateTest, NeedsAShardAxis) {
  FsdpStrategy f;
  StrategyOptionSet o = (*ResolveStrategyOptions({&f}, {}))[0];
  auto no_axis = *comm::MeshLayout::Create({{"dp_replicate", 4}}, 4);
  absl::Status s = f.Validate(o, &no_axis);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("no dp_shard axis"), std::string::npos) << s;
  EXPECT_NE(s.message().find("[dp_replicate=4]"), std::string::npos) << s;

  auto size_one = *comm::MeshLayout::Create({{"dp_replicate", 4}, {"dp_shard", 1}}, 4);
  s = f.Validate(o, &size_one);
  EXPECT_NE(s.message().find("dp_shard axis has size 1"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--dp_shard=4 --dp_replicate=1"), std::string::npos) << s;
  EXPECT_NE(s.message().find("ddp"), std::string::npos) << s;
  // Other axes take the ranks: fsdp over one rank keeps parameters whole
  // (it was refused, though zero-2 on the same mesh was accepted).
  auto tp_only = *comm::MeshLayout::Create({{"dp_replicate", 1}, {"dp_shard", 1}, {"tp", 2}}, 2);
  EXPECT_TRUE(f.Validate(o, &tp_only).ok());

  auto hsdp = *comm::MeshLayout::Create({{"dp_replicate", 2}, {"dp_shard", 2}}, 4);
  EXPECT_TRUE(f.Validate(o, &hsdp).ok());
  auto single = *comm::MeshLayout::Create({{"dp_replicate", 1}, {"dp_shard", 1}}, 1);
  EXPECT_TRUE(f.Validate(o, &single).ok());  // one GPU: a valid degenerate job
  EXPECT_FALSE(f.Validate(o, nullptr).ok());
}

}  // namespace
}  // namespace weft
