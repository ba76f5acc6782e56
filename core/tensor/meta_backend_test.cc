// The meta device: exact allocator statistics, no memory, no-op copies
// (zeros when read back on the host).
#include "gtest/gtest.h"
#include "core/tensor/allocator.h"
#include "core/tensor/tensor.h"

namespace weft {
namespace {

TEST(MetaBackendTest, CountsBytesWithoutMemory) {
  absl::StatusOr<Allocator*> a = DefaultAllocator(Device::Meta());
  ASSERT_TRUE(a.ok()) << a.status();
  const int64_t base = (*a)->Stats().allocated_bytes;
  (*a)->ResetPeak();
  {
    // 64 GiB: far more than this machine has; nothing is touched.
    absl::StatusOr<Tensor> big = Tensor::Empty({int64_t{1} << 34}, DType::kF32, Device::Meta());
    ASSERT_TRUE(big.ok()) << big.status();
    EXPECT_EQ(big->device(), Device::Meta());
    EXPECT_EQ((*a)->Stats().allocated_bytes - base, int64_t{1} << 36);
    absl::StatusOr<Tensor> zeros = Tensor::Zeros({3, 5}, DType::kBF16, Device::Meta());
    ASSERT_TRUE(zeros.ok()) << zeros.status();
    EXPECT_EQ((*a)->Stats().allocated_bytes - base, (int64_t{1} << 36) + 30);
    absl::StatusOr<Tensor> clone = zeros->Clone();
    ASSERT_TRUE(clone.ok()) << clone.status();
    EXPECT_NE(clone->raw_data(), zeros->raw_data());
  }
  EXPECT_EQ((*a)->Stats().allocated_bytes, base);
  EXPECT_EQ((*a)->Stats().peak_allocated_bytes - base, (int64_t{1} << 36) + 60);
}

TEST(MetaBackendTest, HostReadsSeeZeros) {
  absl::StatusOr<Tensor> t = Tensor::Empty({4}, DType::kF32, Device::Meta());
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<std::vector<float>> host = t->ToFloats();
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(*host, std::vector<float>(4, 0.f));
}

TEST(MetaBackendTest, ParsesAndPrints) {
  absl::StatusOr<Device> d = ParseDevice("meta");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->is_meta());
  EXPECT_EQ(d->ToString(), "meta");
  EXPECT_NE(Device::Meta(), Device::Cpu());
}

}  // namespace
}  // namespace weft
