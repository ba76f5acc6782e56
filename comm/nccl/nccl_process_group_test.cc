// NCCL backend on one GPU (world size 1): every op, stream ordering, and
// registration. Tagged `gpu` by cuda_cc_test.
#include "comm/nccl/nccl_process_group.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "comm/process_group/registry.h"
#include "comm/store/hash_store.h"
#include "comm/testing/expect.h"
#include "core/base/status_macros.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

using testing::ExpectTensor;
using testing::MakeTensor;

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // `bazel test //comm/...` on a machine without a GPU: skip, saying why.
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
      GTEST_SKIP() << "no usable GPU here (" << cudaGetErrorString(err) << ")";
    }
    auto pg = CreateProcessGroup("nccl", std::make_shared<HashStore>(), 0, 1,
                                 {.name = "nccl_test", .timeout = absl::Seconds(30),
                                  .nccl = {.device = 0}});
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = *pg;
    ASSERT_EQ(pg_->device(), Device::Cuda(0));
  }

  Tensor Gpu(DType dtype, std::vector<double> values, Shape shape = {}) {
    auto host = MakeTensor(dtype, values, shape);
    EXPECT_TRUE(host.ok()) << host.status();
    auto dev = host->To(Device::Cuda(0));
    EXPECT_TRUE(dev.ok()) << dev.status();
    return *dev;
  }

  absl::Status Check(const std::shared_ptr<Work>& work, const Tensor& t,
                     std::vector<double> want, absl::string_view what) {
    WEFT_RETURN_IF_ERROR(work->Wait());
    WEFT_RETURN_IF_ERROR(work->Synchronize(absl::Seconds(30)));
    return ExpectTensor(t, want, what);
  }

  std::shared_ptr<ProcessGroup> pg_;
};

TEST_F(NcclTest, RegisteredByLinking) {
  const auto names = RegisteredProcessGroupBackends();
  EXPECT_NE(std::find(names.begin(), names.end(), "nccl"), names.end());
}

TEST_F(NcclTest, AllReduceEveryOpAndDType) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kI64}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
      if (op == ReduceOp::kAvg && (dtype == DType::kI32 || dtype == DType::kI64)) continue;
      Tensor t = Gpu(dtype, {1, -2, 3, 7, 0});
      EXPECT_TRUE(Check(pg_->AllReduce(t, {.op = op}), t, {1, -2, 3, 7, 0}, "all_reduce").ok());
    }
  }
}

TEST_F(NcclTest, DataMovementOps) {
  Tensor in = Gpu(DType::kBF16, {1, 2, 3});
  Tensor out = Gpu(DType::kBF16, {0, 0, 0});
  EXPECT_TRUE(Check(pg_->ReduceScatter(in, out), out, {1, 2, 3}, "reduce_scatter").ok());
  Tensor gathered = Gpu(DType::kF32, {0, 0, 0, 0});
  Tensor part = Gpu(DType::kF32, {4, 5, 6, 7});
  EXPECT_TRUE(Check(pg_->AllGather(part, gathered), gathered, {4, 5, 6, 7}, "all_gather").ok());
  std::vector<Tensor> parts = {Gpu(DType::kI64, {0, 0})};
  Tensor mine = Gpu(DType::kI64, {8, 9});
  EXPECT_TRUE(Check(pg_->AllGather(mine, parts), parts[0], {8, 9}, "all_gather parts").ok());
  Tensor b = Gpu(DType::kU16, {11, 12});
  EXPECT_TRUE(Check(pg_->Broadcast(b), b, {11, 12}, "broadcast").ok());
  Tensor a2a_out = Gpu(DType::kF32, {0, 0});
  EXPECT_TRUE(Check(pg_->AllToAll(Gpu(DType::kF32, {3, 4}), a2a_out), a2a_out, {3, 4},
                    "all_to_all")
                  .ok());
  Tensor v_in = Gpu(DType::kF32, {1, 2, 3, 4}, {2, 2});
  Tensor v_out = Gpu(DType::kF32, {0, 0, 0, 0}, {2, 2});
  EXPECT_TRUE(Check(pg_->AllToAllV(v_in, {2}, v_out, {2}), v_out, {1, 2, 3, 4}, "all_to_all_v")
                  .ok());
  // In place: the input is the output.
  EXPECT_TRUE(Check(pg_->AllToAllV(v_out, {2}, v_out, {2}), v_out, {1, 2, 3, 4}, "in place")
                  .ok());
  EXPECT_TRUE(pg_->Barrier()->Synchronize(absl::Seconds(30)).ok());
}

TEST_F(NcclTest, ZeroSizedOpsComplete) {
  Tensor empty = Gpu(DType::kF32, {});
  EXPECT_TRUE(pg_->AllReduce(empty)->Wait().ok());
  EXPECT_TRUE(pg_->Broadcast(empty)->Wait().ok());
  EXPECT_TRUE(pg_->AllGather(empty, empty)->Wait().ok());
}

TEST_F(NcclTest, WaitOrdersTheCallersStreamWithoutBlockingTheHost) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Tensor t = Gpu(DType::kF32, {2, 4});
  auto work = pg_->AllReduce(t, {.op = ReduceOp::kAvg, .stream = stream});
  ASSERT_TRUE(work->Wait().ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(work->IsCompleted());
  EXPECT_TRUE(ExpectTensor(t, {2, 4}, "avg").ok());
  cudaStreamDestroy(stream);
}

// ddp/zero-1/zero-2 crashed at exit on an H100: the trainer destroys the
// process group before the model, whose gradient buckets were recorded on the
// group's stream; freeing them recorded an event on a destroyed stream.
TEST_F(NcclTest, TensorsOutliveTheGroupThatReducedThem) {
  Tensor t = Gpu(DType::kF32, {1, 2, 3, 4});
  ASSERT_TRUE(pg_->AllReduce(t)->Synchronize(absl::Seconds(30)).ok());
  pg_.reset();
  t = Tensor();  // frees into the caching allocator after the group is gone
  Tensor u = Gpu(DType::kF32, {5, 6});
  EXPECT_TRUE(ExpectTensor(u, {5, 6}, "after the group").ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// The loss all-reduce (dp_sum) runs on the compute stream: an op given
// `stream` starts only after the work already queued there. Here the
// producer is delayed on the stream (a 200 ms host callback, then the copy
// of the new value) and the op writes a separate output, so an op ordered
// on the legacy default stream instead would gather the old value.
void CUDART_CB SleepOnStream(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }

TEST_F(NcclTest, OpOnAStreamWaitsForADelayedProducer) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Tensor in = Gpu(DType::kF32, {1});
  Tensor out = Gpu(DType::kF32, {0});
  static float host_value = 0;  // source of the delayed copy; outlives it
  host_value = 7;
  ASSERT_EQ(cudaLaunchHostFunc(stream, SleepOnStream, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(in.raw_data(), &host_value, sizeof(float), cudaMemcpyHostToDevice,
                            stream),
            cudaSuccess);
  auto work = pg_->AllGather(in, out, {.stream = stream});
  ASSERT_TRUE(work->Wait().ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(ExpectTensor(out, {7}, "gathered after the producer").ok());
  cudaStreamDestroy(stream);
}

TEST_F(NcclTest, CpuTensorsAreRejected) {
  auto host = MakeTensor(DType::kF32, {1});
  absl::Status s = pg_->AllReduce(*host)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "cuda:0")) << s;
}

TEST_F(NcclTest, StatsCountLikeGloo) {
  Tensor t = Gpu(DType::kF32, {1, 2, 3, 4});
  ASSERT_TRUE(pg_->AllReduce(t)->Synchronize().ok());
  EXPECT_EQ(pg_->stats()[OpKind::kAllReduce].calls, 1);
  EXPECT_EQ(pg_->stats()[OpKind::kAllReduce].payload_bytes, 16);
  EXPECT_EQ(pg_->stats()[OpKind::kAllReduce].bus_bytes, 0.0);  // one rank moves nothing
}

}  // namespace
}  // namespace weft::comm
