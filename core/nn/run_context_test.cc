// What RunContext hands to kernels: the kernels' scratch allocator, never
// the activations' one, so an eager run's activation tracking counts
// activations only (a twelfth-session change passed `allocator` and made
// every CUDA kernel's scratch count as activations).
#include "core/nn/run_context.h"

#include "core/tensor/allocator.h"
#include "core/tensor/tracking_allocator.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(RunContextTest, KernelsGetTheScratchAllocatorNotTheActivationsOne) {
  TrackingAllocator activations("activations", CpuAllocator());
  TrackingAllocator scratch("scratch", CpuAllocator());
  RunContext ctx;
  ctx.device = Device{DeviceType::kCPU, 0};
  ctx.allocator = &activations;
  EXPECT_EQ(ctx.kernel().allocator, nullptr) << "kernel scratch must default to the device's";
  EXPECT_EQ(ctx.kernel().device, ctx.device);
  ctx.scratch_allocator = &scratch;
  EXPECT_EQ(ctx.kernel().allocator, &scratch);
}

}  // namespace
}  // namespace weft
