// Subgroups of a 2x2 mesh, as threads and as processes: every collective on
// the per-axis groups and on the flattened group, with exact values.
#include "comm/device_mesh/device_mesh.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm/store/hash_store.h"
#include "comm/testing/expect.h"
#include "comm/testing/multiprocess.h"
#include "core/base/status_macros.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

using testing::ExpectTensor;
using testing::ExpectTrue;
using testing::MakeTensor;
using testing::RankContext;
using testing::RankMode;

absl::Status MeshCollectives(const RankContext& ctx) {
  WEFT_ASSIGN_OR_RETURN(auto mesh,
                        DeviceMesh::Create({{"dp", 2}, {"tp", 2}}, ctx.rank, ctx.world_size,
                                           ctx.store,
                                           {.group = {.name = "mesh", .timeout = ctx.timeout}}));
  const int rank = ctx.rank;
  WEFT_ASSIGN_OR_RETURN(auto tp, mesh->Group("tp"));
  WEFT_ASSIGN_OR_RETURN(auto dp, mesh->Group("dp"));
  WEFT_ASSIGN_OR_RETURN(int tp_coord, mesh->Coordinate("tp"));
  WEFT_ASSIGN_OR_RETURN(int dp_coord, mesh->Coordinate("dp"));
  WEFT_RETURN_IF_ERROR(ExpectTrue(tp->size() == 2 && tp->rank() == tp_coord, "tp group rank"));
  WEFT_RETURN_IF_ERROR(ExpectTrue(dp->size() == 2 && dp->rank() == dp_coord, "dp group rank"));
  WEFT_ASSIGN_OR_RETURN(std::vector<int> tp_ranks, mesh->GroupRanks("tp"));
  WEFT_ASSIGN_OR_RETURN(std::vector<int> dp_ranks, mesh->GroupRanks("dp"));
  // Errors name a subgroup's peers by their job-wide ranks too, where those
  // differ from the group ranks (dp's [0, 2] and [1, 3]; an identity
  // mapping such as tp's [0, 1] is left unset).
  const bool identity = dp_ranks[0] == 0 && dp_ranks[1] == 1;
  WEFT_RETURN_IF_ERROR(ExpectTrue(identity ? dp->global_ranks() == nullptr
                                           : dp->global_ranks() != nullptr &&
                                                 *dp->global_ranks() == dp_ranks,
                                  "dp group's global ranks"));

  // all_reduce: each group sums its members' global ranks.
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kI64}) {
    WEFT_ASSIGN_OR_RETURN(Tensor t, MakeTensor(dtype, {1.0 * rank, 10.0 * rank}));
    WEFT_RETURN_IF_ERROR(tp->AllReduce(t)->Wait());
    const double tp_sum = tp_ranks[0] + tp_ranks[1];
    WEFT_RETURN_IF_ERROR(ExpectTensor(t, {tp_sum, 10 * tp_sum}, "tp all_reduce"));
    WEFT_ASSIGN_OR_RETURN(Tensor d, MakeTensor(dtype, {1.0 * rank}));
    WEFT_RETURN_IF_ERROR(dp->AllReduce(d, {.op = ReduceOp::kMax})->Wait());
    WEFT_RETURN_IF_ERROR(ExpectTensor(d, {1.0 * dp_ranks[1]}, "dp all_reduce max"));
  }
  // all_gather along dp, reduce_scatter along tp.
  WEFT_ASSIGN_OR_RETURN(Tensor mine, MakeTensor(DType::kF32, {1.0 * rank, 0.5}));
  WEFT_ASSIGN_OR_RETURN(Tensor gathered, Tensor::Zeros({4}, DType::kF32));
  WEFT_RETURN_IF_ERROR(dp->AllGather(mine, gathered)->Wait());
  WEFT_RETURN_IF_ERROR(ExpectTensor(
      gathered, {1.0 * dp_ranks[0], 0.5, 1.0 * dp_ranks[1], 0.5}, "dp all_gather"));
  WEFT_ASSIGN_OR_RETURN(Tensor full, MakeTensor(DType::kI64, {1.0 * rank, 100.0 * rank}));
  WEFT_ASSIGN_OR_RETURN(Tensor shard, Tensor::Zeros({1}, DType::kI64));
  WEFT_RETURN_IF_ERROR(tp->ReduceScatter(full, shard)->Wait());
  const double tp_sum = tp_ranks[0] + tp_ranks[1];
  WEFT_RETURN_IF_ERROR(
      ExpectTensor(shard, {tp_coord == 0 ? tp_sum : 100 * tp_sum}, "tp reduce_scatter"));
  // broadcast from group rank 1; all_to_all and send/recv inside tp.
  WEFT_ASSIGN_OR_RETURN(Tensor b, MakeTensor(DType::kF32, {1.0 * rank}));
  WEFT_RETURN_IF_ERROR(dp->Broadcast(b, {.root = 1})->Wait());
  WEFT_RETURN_IF_ERROR(ExpectTensor(b, {1.0 * dp_ranks[1]}, "dp broadcast"));
  WEFT_ASSIGN_OR_RETURN(Tensor a2a_in, MakeTensor(DType::kI32, {10.0 * rank, 10.0 * rank + 1}));
  WEFT_ASSIGN_OR_RETURN(Tensor a2a_out, Tensor::Zeros({2}, DType::kI32));
  WEFT_RETURN_IF_ERROR(tp->AllToAll(a2a_in, a2a_out)->Wait());
  WEFT_RETURN_IF_ERROR(ExpectTensor(
      a2a_out, {10.0 * tp_ranks[0] + tp_coord, 10.0 * tp_ranks[1] + tp_coord}, "tp all_to_all"));
  WEFT_ASSIGN_OR_RETURN(Tensor p2p, MakeTensor(DType::kF32, {1.0 * rank}));
  if (tp_coord == 0) {
    WEFT_RETURN_IF_ERROR(tp->Send(p2p, 1)->Wait());
  } else {
    WEFT_RETURN_IF_ERROR(tp->Recv(p2p, 0)->Wait());
    WEFT_RETURN_IF_ERROR(ExpectTensor(p2p, {1.0 * tp_ranks[0]}, "tp recv"));
  }
  // The flattened dp x tp group is the whole world, in rank order.
  WEFT_ASSIGN_OR_RETURN(auto world, mesh->FlatGroup({"tp", "dp"}));
  WEFT_RETURN_IF_ERROR(ExpectTrue(world->size() == 4 && world->rank() == rank, "flat rank"));
  WEFT_ASSIGN_OR_RETURN(Tensor w, MakeTensor(DType::kF32, {1.0 * rank}));
  WEFT_RETURN_IF_ERROR(world->AllReduce(w)->Wait());
  WEFT_RETURN_IF_ERROR(ExpectTensor(w, {6}, "flat all_reduce"));
  // Cached: asking again returns the same groups.
  WEFT_ASSIGN_OR_RETURN(auto tp_again, mesh->Group("tp"));
  WEFT_ASSIGN_OR_RETURN(auto world_again, mesh->FlatGroup({"dp", "tp"}));
  WEFT_ASSIGN_OR_RETURN(auto world_group, mesh->WorldGroup());
  WEFT_RETURN_IF_ERROR(ExpectTrue(tp_again == tp && world_again == world && world_group == world,
                                  "groups cached; WorldGroup is the flat group of every axis"));
  return ExpectTrue(absl::StrContains(tp->name(), "mesh/tp#"), "group name: " + tp->name());
}

class DeviceMeshTest : public ::testing::TestWithParam<RankMode> {};

TEST_P(DeviceMeshTest, CollectivesOnSubgroupsOfA2x2Mesh) {
  auto results = testing::RunRanks(GetParam(), 4, MeshCollectives, {.deadline = absl::Seconds(40)});
  EXPECT_TRUE(testing::AllRanksOk(results).ok()) << testing::AllRanksOk(results);
}

INSTANTIATE_TEST_SUITE_P(Modes, DeviceMeshTest,
                         ::testing::Values(RankMode::kThreads, RankMode::kProcesses),
                         [](const auto& info) { return std::string(testing::RankModeName(info.param)); });

TEST(DeviceMeshCreateTest, RejectsAMeshThatDoesNotMatchTheWorld) {
  auto mesh = DeviceMesh::Create({{"dp", 3}, {"tp", 2}}, 0, 4, std::make_shared<HashStore>());
  ASSERT_EQ(mesh.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(mesh.status().message(), "has 6 ranks")) << mesh.status();
}

TEST(DeviceMeshCreateTest, SingleRankMeshNeedsNoPeers) {
  auto mesh = DeviceMesh::Create({{"dp", 1}, {"tp", 1}}, 0, 1, std::make_shared<HashStore>());
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  auto tp = (*mesh)->Group("tp");
  ASSERT_TRUE(tp.ok());
  EXPECT_EQ((*tp)->size(), 1);
  EXPECT_FALSE((*mesh)->Group("pp").ok());
  EXPECT_EQ((*mesh)->ToString(), "mesh [dp=1, tp=1], rank 0 at (0, 0)");
}

}  // namespace
}  // namespace weft::comm
