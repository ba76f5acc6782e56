#include "core/tensor/tensor.h"

#include <numeric>
#include <vector>

#include "core/tensor/cpu_allocator.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

Tensor Iota(Shape shape) {
  std::vector<float> v(NumElements(shape));
  std::iota(v.begin(), v.end(), 0.f);
  return *Tensor::FromFloats(v, shape);
}

TEST(TensorTest, EmptyHasContiguousStrides) {
  Tensor t = *Tensor::Empty({2, 3, 4}, DType::kF32);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.DebugString(), "Tensor(f32[2, 3, 4] on cpu)");
}

TEST(TensorTest, ZeroSizedTensorsAreContiguous) {
  // {4, 0} has strides {0, 1}; kernels that require contiguity must accept it.
  for (const Shape& shape : {Shape{4, 0}, Shape{0, 8}, Shape{2, 0, 3}}) {
    EXPECT_TRUE(Tensor::Empty(shape, DType::kF32)->is_contiguous());
  }
}

TEST(TensorTest, ZeroSizedTensorsAreValid) {
  Tensor t = *Tensor::Zeros({0, 5}, DType::kBF16);
  EXPECT_EQ(t.numel(), 0);
  Tensor u = *Tensor::Zeros({0, 5}, DType::kF32);
  EXPECT_TRUE(u.CopyFrom(t).ok());
  EXPECT_TRUE(t.ToFloats()->empty());
}

TEST(TensorTest, BadShapesAreErrors) {
  EXPECT_EQ(Tensor::Empty({2, -1}, DType::kF32).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::Empty({1, 1, 1, 1, 1, 1, 1, 1, 1}, DType::kF32).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Tensor::FromFloats({1.f, 2.f}, {3}).ok());
}

TEST(TensorTest, ViewsShareStorage) {
  Tensor t = Iota({2, 3});
  Tensor v = t.View({3, -1});
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  v.data<float>()[0] = 42.f;
  EXPECT_EQ(t.data<float>()[0], 42.f);
}

TEST(TensorTest, TransposeSliceSelectAndContiguous) {
  Tensor t = Iota({2, 3});  // [[0 1 2] [3 4 5]]
  Tensor tt = t.Transpose(0, 1);
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(*tt.ToFloats(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor c = *tt.Contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_NE(c.storage(), t.storage());
  EXPECT_EQ(*t.Slice(1, 1, 3).ToFloats(), (std::vector<float>{1, 2, 4, 5}));
  EXPECT_EQ(*t.Select(0, 1).ToFloats(), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(*t.Select(1, 2).ToFloats(), (std::vector<float>{2, 5}));
  Tensor p = Iota({2, 3, 4}).Permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.ToFloats()->at(1), 4.f);  // element [0, 0, 1] = source [0, 1, 0]
}

TEST(TensorTest, ContiguousOfContiguousIsTheSameTensor) {
  Tensor t = Iota({4});
  EXPECT_EQ(t.Contiguous()->storage(), t.storage());
}

TEST(TensorTest, ViewOfStridedTensorAborts) {
  Tensor t = Iota({2, 3}).Transpose(0, 1);
  EXPECT_DEATH(t.View({6}), "non-contiguous");
}

TEST(TensorTest, DTypeConversionRoundsToNearestEven) {
  // 1 + 2^-8 is a bf16 tie: it must round to 1.0, not up.
  Tensor f = *Tensor::FromFloats({1.0f + 1.0f / 256, 3.0f}, {2});
  Tensor b = *f.ToDType(DType::kBF16);
  EXPECT_EQ(b.data<BFloat16>()[0].bits, 0x3f80);
  EXPECT_EQ(*b.ToFloats(), (std::vector<float>{1.0f, 3.0f}));
  Tensor h = *f.ToDType(DType::kF16);
  EXPECT_EQ(*h.ToFloats(), (std::vector<float>{1.0f + 1.0f / 256, 3.0f}));
}

TEST(TensorTest, StridedCastCopy) {
  Tensor src = Iota({3, 2}).Transpose(0, 1);  // strided f32
  Tensor dst = *Tensor::Empty({2, 3}, DType::kBF16);
  ASSERT_TRUE(dst.CopyFrom(src).ok());
  EXPECT_EQ(*dst.ToFloats(), (std::vector<float>{0, 2, 4, 1, 3, 5}));
}

TEST(TensorTest, IntegerTensorsCopyExactly) {
  std::vector<int64_t> big = {int64_t{1} << 40, -7};
  Tensor t = *Tensor::FromVector<int64_t>(big, {2});
  Tensor s = t.Slice(0, 0, 2);
  EXPECT_EQ(*s.ToVector<int64_t>(), big);
  Tensor i32 = *t.ToDType(DType::kI32);
  EXPECT_EQ(i32.data<int32_t>()[1], -7);
  Tensor u16 = *Tensor::FromVector<uint16_t>(std::vector<uint16_t>{65535, 1}, {2});
  Tensor as_i64 = *u16.ToDType(DType::kI64);
  EXPECT_EQ(as_i64.data<int64_t>()[0], 65535);
}

TEST(TensorTest, CopyFromChecksShapes) {
  Tensor a = *Tensor::Empty({2, 3}, DType::kF32);
  Tensor b = *Tensor::Empty({3, 2}, DType::kF32);
  absl::Status s = a.CopyFrom(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[3, 2] into [2, 3]"), std::string::npos);
}

TEST(TensorTest, ZeroOfStridedView) {
  Tensor t = Iota({2, 3});
  ASSERT_TRUE(t.Slice(1, 1, 2).Zero().ok());
  EXPECT_EQ(*t.ToFloats(), (std::vector<float>{0, 0, 2, 3, 0, 5}));
}

TEST(TensorTest, ExplicitAllocatorIsUsedAndFreed) {
  CpuAlignedAllocator a("mine");
  {
    Tensor t = *Tensor::Empty({10}, DType::kF32, Device::Cpu(), &a);
    EXPECT_EQ(a.Stats().allocated_bytes, 40);
    Tensor view = t.Slice(0, 2, 5);  // shares storage: no new bytes
    EXPECT_EQ(a.Stats().allocated_bytes, 40);
    Tensor clone = *view.Clone();
    EXPECT_EQ(a.Stats().allocated_bytes, 52);
  }
  EXPECT_EQ(a.Stats().allocated_bytes, 0);
}

TEST(TensorTest, FromBlobDoesNotOwn) {
  std::vector<float> data = {1, 2, 3};
  {
    Tensor t = Tensor::FromBlob(data.data(), {3}, DType::kF32);
    t.data<float>()[2] = 9;
  }
  EXPECT_EQ(data[2], 9);
}

TEST(TensorTest, CudaTensorWithoutBackendIsAnError) {
  auto t = Tensor::Empty({4}, DType::kF32, Device::Cuda(0));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace weft
