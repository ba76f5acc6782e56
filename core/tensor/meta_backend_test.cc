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

// An allocator that lends one buffer at a time, as a loader's ring slot does.
class OneBufferAllocator : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(size_t bytes, NativeStream) override {
    if (lent_ || bytes > sizeof(buffer_)) return absl::FailedPreconditionError("lent twice");
    lent_ = true;
    return static_cast<void*>(buffer_);
  }
  void Free(void*) override { lent_ = false; }
  AllocatorStats Stats() const override { return {}; }
  void ResetPeak() override {}
  Device device() const override { return Device::Cpu(); }
  std::string Name() const override { return "one-buffer"; }

 private:
  alignas(64) char buffer_[256];
  bool lent_ = false;
};

// A strided host view copied to the meta device (a context-parallel chunk
// of a loaded batch in a dry run) is staged in ordinary host memory, not
// through the allocator of the view's storage, which may lend one buffer.
TEST(MetaBackendTest, StridedHostSourceStagesOutsideItsAllocator) {
  OneBufferAllocator lender;
  absl::StatusOr<Tensor> batch = Tensor::Empty({2, 8}, DType::kI32, Device::Cpu(), &lender);
  ASSERT_TRUE(batch.ok()) << batch.status();
  Tensor chunk = batch->Slice(1, 2, 4);  // (2, 2), not contiguous
  ASSERT_FALSE(chunk.is_contiguous());
  absl::StatusOr<Tensor> dst = Tensor::Empty({2, 2}, DType::kI32, Device::Meta());
  ASSERT_TRUE(dst.ok()) << dst.status();
  EXPECT_TRUE(dst->CopyFrom(chunk, nullptr).ok());
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
