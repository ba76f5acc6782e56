// Argument checks, fail-fast and traffic counting of the ProcessGroup base,
// exercised through a fake backend that finishes every op at once.
#include "comm/process_group/registry.h"

#include "absl/strings/match.h"
#include "comm/store/hash_store.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

class FakeGroup : public ProcessGroup {
 public:
  FakeGroup(int rank, int size, const ProcessGroupOptions& options)
      : ProcessGroup("fake", options.name, rank, size, Device::Cpu(), options.timeout) {}

  void Break(absl::Status s) { MarkBroken(s); }
  int issued = 0;
  std::vector<int64_t> last_in_counts;

 protected:
  std::shared_ptr<Work> Done(const OpContext& ctx) {
    ++issued;
    return MakeCompletedWork(ctx.info, absl::OkStatus());
  }
  std::shared_ptr<Work> DoAllReduce(const OpContext& c, const Tensor&, ReduceOp) override {
    return Done(c);
  }
  std::shared_ptr<Work> DoReduceScatter(const OpContext& c, const Tensor&, const Tensor&,
                                        ReduceOp) override {
    return Done(c);
  }
  std::shared_ptr<Work> DoAllGather(const OpContext& c, const Tensor&, const Tensor&) override {
    return Done(c);
  }
  std::shared_ptr<Work> DoAllGatherV(const OpContext& c, const Tensor&,
                                     std::vector<Tensor>) override {
    return Done(c);
  }
  std::shared_ptr<Work> DoBroadcast(const OpContext& c, const Tensor&, int) override {
    return Done(c);
  }
  std::shared_ptr<Work> DoAllToAllV(const OpContext& c, const Tensor&, std::vector<int64_t> in,
                                    const Tensor&, std::vector<int64_t>) override {
    last_in_counts = in;
    return Done(c);
  }
  std::shared_ptr<Work> DoBatchSendRecv(const OpContext& c, std::vector<P2POp>) override {
    return Done(c);
  }
  std::shared_ptr<Work> DoBarrier(const OpContext& c) override { return Done(c); }
};

const bool kFakeRegistered = RegisterProcessGroupBackendAtStartup(
    "fake", [](std::shared_ptr<Store>, int rank, int size, const ProcessGroupOptions& o)
                -> absl::StatusOr<std::shared_ptr<ProcessGroup>> {
      return std::make_shared<FakeGroup>(rank, size, o);
    });

std::shared_ptr<FakeGroup> MakeFake(int rank = 1, int size = 4) {
  auto group = CreateProcessGroup("fake", std::make_shared<HashStore>(), rank, size,
                                  {.name = "fake_world", .timeout = absl::Seconds(3)});
  EXPECT_TRUE(group.ok()) << group.status();
  return std::static_pointer_cast<FakeGroup>(*group);
}

Tensor F32(int64_t n) { return *Tensor::Zeros({n}, DType::kF32); }

TEST(RegistryTest, UnknownBackendListsLinkedOnes) {
  auto g = CreateProcessGroup("mpi", std::make_shared<HashStore>(), 0, 1);
  ASSERT_EQ(g.status().code(), absl::StatusCode::kNotFound) << g.status();
  EXPECT_TRUE(absl::StrContains(g.status().message(), "fake")) << g.status();
}

TEST(RegistryTest, KnownButMissingBackendSaysWhatToLink) {
  auto g = CreateProcessGroup("nccl", std::make_shared<HashStore>(), 0, 1);
  ASSERT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition) << g.status();
  EXPECT_TRUE(absl::StrContains(g.status().message(), "//comm/nccl")) << g.status();
}

TEST(RegistryTest, RejectsBadRankAndTimeout) {
  auto store = std::make_shared<HashStore>();
  EXPECT_EQ(CreateProcessGroup("fake", store, 4, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateProcessGroup("fake", store, 0, 4, {.timeout = absl::ZeroDuration()})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateProcessGroup("fake", nullptr, 0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ProcessGroupChecksTest, NonContiguousTensorIsInvalidArgument) {
  auto g = MakeFake();
  Tensor m = *Tensor::Zeros({3, 4}, DType::kF32);
  absl::Status s = g->AllReduce(m.Transpose(0, 1))->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "not contiguous")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "group 'fake_world'")) << s;
  EXPECT_EQ(g->issued, 0);
  // Argument errors neither break the group nor count traffic.
  EXPECT_TRUE(g->health().ok());
  EXPECT_EQ(g->stats().Total().calls, 0);
}

TEST(ProcessGroupChecksTest, ReductionDTypeRules) {
  auto g = MakeFake();
  Tensor u16 = *Tensor::Zeros({4}, DType::kU16);
  Tensor i64 = *Tensor::Zeros({4}, DType::kI64);
  EXPECT_EQ(g->AllReduce(u16)->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g->AllReduce(i64, {.op = ReduceOp::kAvg})->Wait().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(g->AllReduce(i64, {.op = ReduceOp::kMax})->Wait().ok());
  // u16 moves fine.
  EXPECT_TRUE(g->Broadcast(u16)->Wait().ok());
}

TEST(ProcessGroupChecksTest, SizeRulesNameTheNumbers) {
  auto g = MakeFake(1, 4);
  absl::Status rs = g->ReduceScatter(F32(10), F32(3))->Wait();
  EXPECT_EQ(rs.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(rs.message(), "10")) << rs;
  EXPECT_TRUE(absl::StrContains(rs.message(), "group size (4)")) << rs;
  EXPECT_EQ(g->AllGather(F32(3), F32(11))->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g->AllToAll(F32(6), F32(6))->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g->Broadcast(F32(3), {.root = 4})->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g->Send(F32(3), 1)->Wait().code(), absl::StatusCode::kInvalidArgument);  // self
  EXPECT_EQ(g->Recv(F32(3), -1)->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g->AllToAllV(F32(5), {1, 1, 1, 1}, F32(4), {1, 1, 1, 1})->Wait().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g->AllToAllV(F32(4), {1, 1, 2}, F32(4), {1, 1, 1, 1})->Wait().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g->AllReduce(F32(2), {.timeout = absl::Seconds(-1)})->Wait().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<Tensor> parts = {F32(1), F32(2), F32(3), F32(4)};
  EXPECT_EQ(g->AllGather(F32(3), parts)->Wait().code(),  // parts[1] has 2, input 3
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g->issued, 0);
}

TEST(ProcessGroupChecksTest, AllToAllVSplitsCountRows) {
  auto g = MakeFake(0, 2);
  Tensor in = *Tensor::Zeros({3, 5}, DType::kF32);
  Tensor out = *Tensor::Zeros({4, 5}, DType::kF32);
  ASSERT_TRUE(g->AllToAllV(in, {1, 2}, out, {1, 3})->Wait().ok());
  EXPECT_EQ(g->last_in_counts, (std::vector<int64_t>{5, 10}));
  // Rows must match between input and output.
  Tensor bad = *Tensor::Zeros({4, 4}, DType::kF32);
  EXPECT_EQ(g->AllToAllV(in, {1, 2}, bad, {1, 3})->Wait().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ProcessGroupChecksTest, StatsAreExact) {
  auto g = MakeFake(0, 4);
  ASSERT_TRUE(g->AllReduce(F32(100))->Wait().ok());                       // 400 B
  ASSERT_TRUE(g->ReduceScatter(F32(400), F32(100))->Wait().ok());         // 1600 B
  ASSERT_TRUE(g->AllGather(F32(100), F32(400))->Wait().ok());             // 1600 B
  std::vector<Tensor> parts = {F32(1), F32(2), F32(3), F32(4)};           // uneven
  ASSERT_TRUE(g->AllGather(F32(1), parts)->Wait().ok());                  // 40 B, own 4
  ASSERT_TRUE(g->Broadcast(F32(10))->Wait().ok());                        // 40 B
  ASSERT_TRUE(g->AllToAll(F32(8), F32(8))->Wait().ok());                  // 32 B
  ASSERT_TRUE(g->AllToAllV(F32(4), {1, 1, 1, 1}, F32(4), {1, 1, 1, 1})->Wait().ok());
  ASSERT_TRUE(g->Send(F32(5), 2)->Wait().ok());
  ASSERT_TRUE(g->BatchSendRecv({P2POp{P2POp::Type::kSend, F32(2), 1, 0},
                                P2POp{P2POp::Type::kRecv, F32(3), 3, 0}})
                  ->Wait()
                  .ok());
  ASSERT_TRUE(g->Barrier()->Wait().ok());
  const CommStats s = g->stats();
  EXPECT_EQ(s[OpKind::kAllReduce].payload_bytes, 400);
  EXPECT_DOUBLE_EQ(s[OpKind::kAllReduce].bus_bytes, 600.0);
  EXPECT_DOUBLE_EQ(s[OpKind::kReduceScatter].bus_bytes, 1200.0);
  EXPECT_EQ(s[OpKind::kAllGather].calls, 2);
  EXPECT_EQ(s[OpKind::kAllGather].payload_bytes, 1640);
  EXPECT_DOUBLE_EQ(s[OpKind::kAllGather].bus_bytes, 1200.0 + 36.0);
  EXPECT_DOUBLE_EQ(s[OpKind::kBroadcast].bus_bytes, 40.0);
  EXPECT_DOUBLE_EQ(s[OpKind::kAllToAll].bus_bytes, 24.0);
  EXPECT_DOUBLE_EQ(s[OpKind::kAllToAllV].bus_bytes, 12.0);
  EXPECT_EQ(s[OpKind::kSend].calls, 2);
  EXPECT_EQ(s[OpKind::kSend].payload_bytes, 28);
  EXPECT_EQ(s[OpKind::kRecv].payload_bytes, 12);
  EXPECT_EQ(s[OpKind::kBarrier].calls, 1);
  g->ResetStats();
  EXPECT_EQ(g->stats().Total().calls, 0);
}

TEST(ProcessGroupChecksTest, BrokenGroupFailsFastWithTheFirstError) {
  auto g = MakeFake();
  ASSERT_TRUE(g->AllReduce(F32(1))->Wait().ok());
  g->Break(absl::DeadlineExceededError("all_reduce #1 timed out"));
  absl::Status s = g->Broadcast(F32(1))->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(s.message(), "broadcast #2")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "all_reduce #1 timed out")) << s;
  EXPECT_EQ(g->issued, 1);
}

}  // namespace
}  // namespace weft::comm
