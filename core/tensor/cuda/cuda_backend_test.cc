// GPU tests for the CUDA backend: caching allocator, streams and events,
// pinned memory and async copies. Tagged `gpu`; run on the device machine.
#include <numeric>
#include <vector>

#include "core/tensor/allocator.h"
#include "core/tensor/caching_allocator.h"
#include "core/tensor/device_backend.h"
#include "core/tensor/stream.h"
#include "core/tensor/tensor.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

const Device kGpu = Device::Cuda(0);

TEST(CudaBackendTest, DeviceToDeviceCopyOnAStreamDoesNotBlockTheHost) {
  DeviceBackend* backend = *GetDeviceBackend(DeviceType::kCUDA);
  Stream s = *Stream::Create(kGpu);
  Tensor host = *Tensor::FromFloats({1.f, 2.f, 3.f, 4.f}, {4});
  Tensor a = *host.To(kGpu, s.native());  // H2D on a stream: one stream wait
  const int64_t before = backend->HostSyncCount();
  Tensor b = *a.Clone(s.native());  // D2D: stream-ordered, no host wait
  ASSERT_TRUE(b.CopyFrom(a, s.native()).ok());
  EXPECT_EQ(backend->HostSyncCount(), before);
  Tensor back = *b.To(Device::Cpu(), s.native());  // D2H: exactly one wait
  EXPECT_EQ(backend->HostSyncCount(), before + 1);
  EXPECT_EQ(*back.ToFloats(), std::vector<float>({1.f, 2.f, 3.f, 4.f}));
}

TEST(CudaBackendTest, PinnedAllocatorIsRealPinnedMemory) {
  Allocator* pinned = PinnedHostAllocator();
  EXPECT_TRUE(pinned->pinned());
  const int64_t before = pinned->Stats().allocated_bytes;
  void* p = *pinned->Allocate(1 << 20, nullptr);
  EXPECT_EQ(pinned->Stats().allocated_bytes - before, 1 << 20);
  pinned->Free(p);
  EXPECT_EQ(pinned->Stats().allocated_bytes, before);
}

TEST(CudaBackendTest, CachingAllocatorReusesAndCountsExactly) {
  auto* alloc = static_cast<CachingAllocator*>(*DefaultAllocator(kGpu));
  const AllocatorStats s0 = alloc->Stats();
  void* a = *alloc->Allocate(1000, nullptr);
  EXPECT_EQ(alloc->Stats().allocated_bytes - s0.allocated_bytes, 1000);
  alloc->Free(a);
  void* b = *alloc->Allocate(800, nullptr);
  EXPECT_EQ(a, b);
  alloc->Free(b);
  EXPECT_EQ(alloc->Stats().allocated_bytes, s0.allocated_bytes);
}

TEST(CudaBackendTest, AsyncRoundTripThroughPinnedMemoryOnAStream) {
  Stream copy = *Stream::Create(kGpu);
  const int n = 1 << 20;
  Tensor host = *Tensor::Empty({n}, DType::kF32, Device::Cpu(), PinnedHostAllocator());
  std::iota(host.data<float>(), host.data<float>() + n, 0.f);
  Tensor dev = *host.To(kGpu, copy.native(), /*async=*/true);
  Tensor back = *Tensor::Empty({n}, DType::kF32, Device::Cpu(), PinnedHostAllocator());
  ASSERT_TRUE(back.CopyFrom(dev, copy.native(), /*async=*/true).ok());
  Event done = *Event::Create(kGpu);
  ASSERT_TRUE(done.Record(copy).ok());
  ASSERT_TRUE(done.Synchronize().ok());
  EXPECT_TRUE(*done.Query());
  for (int i = 0; i < n; i += 4099) ASSERT_EQ(back.data<float>()[i], float(i));
}

TEST(CudaBackendTest, StreamWaitsForEventOnAnotherStream) {
  Stream producer = *Stream::Create(kGpu);
  Stream consumer = *Stream::Create(kGpu);
  const int n = 1 << 22;
  Tensor src = *Tensor::Empty({n}, DType::kF32, Device::Cpu(), PinnedHostAllocator());
  std::fill(src.data<float>(), src.data<float>() + n, 3.f);
  Tensor dev = *Tensor::Empty({n}, DType::kF32, kGpu, nullptr, producer.native());
  ASSERT_TRUE(dev.CopyFrom(src, producer.native(), true).ok());
  Event ready = *Event::Create(kGpu);
  ASSERT_TRUE(ready.Record(producer).ok());
  ASSERT_TRUE(consumer.Wait(ready).ok());
  Tensor bf = *dev.ToDType(DType::kBF16, consumer.native());
  ASSERT_TRUE(consumer.Synchronize().ok());
  std::vector<float> got = *bf.ToFloats();
  EXPECT_EQ(got.front(), 3.f);
  EXPECT_EQ(got.back(), 3.f);
}

TEST(CudaBackendTest, TimingEventsMeasureElapsedTime) {
  Stream s = *Stream::Create(kGpu);
  Event a = *Event::Create(kGpu, true);
  Event b = *Event::Create(kGpu, true);
  Tensor t = *Tensor::Zeros({1 << 24}, DType::kF32, kGpu, nullptr, s.native());
  ASSERT_TRUE(a.Record(s).ok());
  ASSERT_TRUE(t.Zero(s.native()).ok());
  ASSERT_TRUE(b.Record(s).ok());
  ASSERT_TRUE(b.Synchronize().ok());
  EXPECT_GT(*Event::ElapsedMs(a, b), 0.f);
}

TEST(CudaBackendTest, StridedCastMatchesHostRounding) {
  std::vector<float> v(6 * 5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 1.0f + float(i) / 256.f;
  Tensor host = *Tensor::FromFloats(v, {6, 5});
  Tensor dev = *host.To(kGpu);
  Tensor dev_t = *dev.Transpose(0, 1).ToDType(DType::kBF16);
  Tensor host_t = *host.Transpose(0, 1).ToDType(DType::kBF16);
  std::vector<uint16_t> a(30), b(30);
  Tensor dev_back = *dev_t.To(Device::Cpu());
  for (int i = 0; i < 30; ++i) {
    a[i] = dev_back.data<BFloat16>()[i].bits;
    b[i] = host_t.data<BFloat16>()[i].bits;
  }
  EXPECT_EQ(a, b);
}

TEST(CudaBackendTest, CrossStreamUseDelaysReuse) {
  auto* alloc = static_cast<CachingAllocator*>(*DefaultAllocator(kGpu));
  Stream s1 = *Stream::Create(kGpu);
  Stream s2 = *Stream::Create(kGpu);
  void* p = *alloc->Allocate(1 << 16, s1.native());
  ASSERT_TRUE(alloc->RecordStream(p, s2.native()).ok());
  alloc->Free(p);
  ASSERT_TRUE(s2.Synchronize().ok());
  void* q = *alloc->Allocate(1 << 16, s1.native());  // event done: reuse is safe now
  EXPECT_EQ(p, q);
  alloc->Free(q);
}

TEST(CudaBackendTest, BadDeviceIndexIsAClearError) {
  auto t = Tensor::Empty({4}, DType::kF32, Device::Cuda(63));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("does not exist"), std::string::npos);
}

}  // namespace
}  // namespace weft
