#include "core/tensor/cpu_allocator.h"

#include <cstdint>
#include <thread>
#include <vector>

#include "core/tensor/allocator.h"
#include "core/tensor/tracking_allocator.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(CpuAllocatorTest, AlignedAndExactStats) {
  CpuAlignedAllocator a("test");
  void* p = *a.Allocate(100, nullptr);
  void* q = *a.Allocate(1000, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 64, 0u);
  AllocatorStats s = a.Stats();
  EXPECT_EQ(s.allocated_bytes, 1100);
  EXPECT_EQ(s.reserved_bytes, 128 + 1024);
  EXPECT_EQ(s.peak_allocated_bytes, 1100);
  EXPECT_EQ(s.num_allocs, 2);
  a.Free(p);
  s = a.Stats();
  EXPECT_EQ(s.allocated_bytes, 1000);
  EXPECT_EQ(s.reserved_bytes, 1024);
  EXPECT_EQ(s.peak_allocated_bytes, 1100);
  EXPECT_EQ(s.num_frees, 1);
  a.ResetPeak();
  EXPECT_EQ(a.Stats().peak_allocated_bytes, 1000);
  a.Free(q);
  EXPECT_EQ(a.Stats().allocated_bytes, 0);
  EXPECT_EQ(a.Stats().reserved_bytes, 0);
}

TEST(CpuAllocatorTest, ConcurrentUseKeepsExactCounts) {
  CpuAlignedAllocator a("threads");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a] {
      for (int i = 0; i < 1000; ++i) a.Free(*a.Allocate(64 + i % 7, nullptr));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(a.Stats().allocated_bytes, 0);
  EXPECT_EQ(a.Stats().num_allocs, 4000);
  EXPECT_EQ(a.Stats().num_frees, 4000);
}

TEST(CpuAllocatorTest, FreeOfForeignPointerAborts) {
  CpuAlignedAllocator a("test");
  int x = 0;
  EXPECT_DEATH(a.Free(&x), "did not allocate");
}

TEST(PinnedAllocatorTest, FallsBackToHostMemoryWithoutGpu) {
  // This test binary links no CUDA backend, so the fallback must serve.
  Allocator* pinned = PinnedHostAllocator();
  EXPECT_FALSE(pinned->pinned());
  EXPECT_TRUE(pinned->device().is_cpu());
  void* p = *pinned->Allocate(4096, nullptr);
  EXPECT_EQ(pinned->Stats().allocated_bytes, 4096);
  pinned->Free(p);
  EXPECT_EQ(pinned->Stats().allocated_bytes, 0);
}

TEST(DefaultAllocatorTest, CudaWithoutBackendSaysWhy) {
  auto a = DefaultAllocator(Device::Cuda(0));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(a.status().message().find("CUDA backend is not linked"), std::string::npos);
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

TEST(TrackingAllocatorTest, CountsOnlyItsOwnBlocks) {
  CpuAlignedAllocator base("base");
  TrackingAllocator params("params", &base), grads("grads", &base);
  void* a = *params.Allocate(100, nullptr);
  void* b = *grads.Allocate(30, nullptr);
  EXPECT_EQ(params.Stats().allocated_bytes, 100);
  EXPECT_EQ(grads.Stats().allocated_bytes, 30);
  EXPECT_EQ(base.Stats().allocated_bytes, 130);
  params.Free(a);
  EXPECT_EQ(params.Stats().allocated_bytes, 0);
  EXPECT_EQ(params.Stats().peak_allocated_bytes, 100);
  grads.Free(b);
  EXPECT_EQ(base.Stats().allocated_bytes, 0);
}

}  // namespace
}  // namespace weft
