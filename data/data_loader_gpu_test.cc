// GPU tests for the loader's async copy path (tag `gpu`; run on a GPU
// machine): batches arrive on the device with the same contents as the CPU
// path, compute waits on each batch's own event, and ring slots are only
// overwritten after their copy finished.
#include <memory>
#include <vector>

#include "core/tensor/allocator.h"
#include "core/tensor/stream.h"
#include "data/data_loader.h"
#include "data/test_util.h"
#include "gtest/gtest.h"

namespace weft::data {
namespace {

using testing::SyntheticDataset;

const Device kGpu = Device::Cuda(0);

DataLoader::Options Opts(Device device, int workers) {
  DataLoader::Options o;
  o.batch_size = 64;
  o.num_workers = workers;
  o.prefetch_depth = 2;
  o.seed = 3;
  o.device = device;
  return o;
}

std::vector<int32_t> HostIndices(const Batch& b, const Stream& compute) {
  const Tensor& t = b.Get("index");
  EXPECT_EQ(t.device(), b.ready_event() ? kGpu : Device::Cpu());
  if (t.device().is_cpu()) return *t.ToVector<int32_t>();
  Tensor host = *Tensor::Empty(t.shape(), t.dtype(), Device::Cpu());
  EXPECT_TRUE(host.CopyFrom(t, compute.native(), /*async=*/false).ok());
  EXPECT_TRUE(compute.Synchronize().ok());
  return *host.ToVector<int32_t>();
}

TEST(DataLoaderGpuTest, DeviceBatchesMatchTheCpuPathAcrossSlotReuse) {
  ASSERT_TRUE(PinnedHostAllocator()->pinned()) << "ring buffers must be page-locked (no GPU?)";
  auto ds = std::make_shared<SyntheticDataset>(5000);
  Stream compute = *Stream::Create(kGpu);
  auto cpu = *DataLoader::Create(ds, Opts(Device::Cpu(), 2));
  for (int workers : {0, 1, 3}) {
    auto created = DataLoader::Create(ds, Opts(kGpu, workers));
    ASSERT_TRUE(created.ok()) << created.status();
    auto gpu = *std::move(created);
    ASSERT_NE(gpu->copy_stream(), nullptr);
    ASSERT_TRUE(cpu->Restore(gpu->State()).ok());
    // 4 slots, 100 batches: every slot is reused ~25 times.
    for (int i = 0; i < 100; ++i) {
      Batch b = *gpu->Next();
      ASSERT_NE(b.ready_event(), nullptr);
      ASSERT_TRUE(b.WaitOn(compute).ok());
      Batch want = *cpu->Next();
      ASSERT_EQ(HostIndices(b, compute), HostIndices(want, compute)) << "batch " << i;
      const std::vector<float> payload = *b.Get("payload").ToFloats();
      for (int r = 0; r < 64; ++r) {
        ASSERT_EQ(payload[3 * r + 1], HostIndices(want, compute)[r] + 0.5f);
      }
    }
  }
}

TEST(DataLoaderGpuTest, ComputeWaitsOnTheBatchEventWithoutHostSync) {
  auto created = DataLoader::Create(std::make_shared<SyntheticDataset>(1000), Opts(kGpu, 2));
  ASSERT_TRUE(created.ok()) << created.status();
  auto gpu = *std::move(created);
  Stream compute = *Stream::Create(kGpu);
  Batch b = *gpu->Next();
  ASSERT_TRUE(b.WaitOn(compute).ok());
  // After the compute stream drains, this batch's copy has finished.
  ASSERT_TRUE(compute.Synchronize().ok());
  EXPECT_TRUE(*b.ready_event()->Query());
}

TEST(DataLoaderGpuTest, BatchesSurviveTheLoader) {
  auto stream = Stream::Create(kGpu);
  ASSERT_TRUE(stream.ok()) << stream.status();
  Stream compute = *std::move(stream);
  Batch b;
  {
    auto gpu = DataLoader::Create(std::make_shared<SyntheticDataset>(1000), Opts(kGpu, 4));
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    b = *(*gpu)->Next();
  }
  ASSERT_TRUE(b.WaitOn(compute).ok());
  const std::vector<int32_t> ids = HostIndices(b, compute);
  const std::vector<float> payload = *b.Get("payload").ToFloats();
  EXPECT_EQ(payload[1], ids[0] + 0.5f);
}

}  // namespace
}  // namespace weft::data
