#include "core/tensor/tensor.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/tensor/device_backend.h"

namespace weft {

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

int64_t NumElements(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Storage::~Storage() {
  if (allocator_ != nullptr) allocator_->Free(data_);
}

Shape Tensor::ContiguousStrides(absl::Span<const int64_t> shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

absl::StatusOr<Tensor> Tensor::Empty(Shape shape, DType dtype, Device device,
                                     Allocator* allocator, NativeStream stream) {
  if (shape.size() > static_cast<size_t>(kMaxDims)) {
    return InvalidArgument(absl::StrCat("tensor of rank ", shape.size()),
                           absl::StrCat("rank <= ", kMaxDims));
  }
  for (int64_t d : shape) {
    if (d < 0) {
      return InvalidArgument("negative dimension in shape " + ShapeString(shape),
                             "dimensions >= 0");
    }
  }
  if (allocator == nullptr) {
    WEFT_ASSIGN_OR_RETURN(allocator, DefaultAllocator(device));
  }
  if (allocator->device() != device) {
    return InvalidArgument(absl::StrCat("allocator '", allocator->Name(), "' serves ",
                                        allocator->device().ToString()),
                           "an allocator for " + device.ToString());
  }
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  WEFT_ASSIGN_OR_RETURN(void* data, allocator->Allocate(std::max<size_t>(bytes, 1), stream));
  Tensor t;
  t.storage_ = std::make_shared<Storage>(data, bytes, device, allocator);
  t.strides_ = ContiguousStrides(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  return t;
}

absl::StatusOr<Tensor> Tensor::Zeros(Shape shape, DType dtype, Device device,
                                     Allocator* allocator, NativeStream stream) {
  WEFT_ASSIGN_OR_RETURN(Tensor t, Empty(std::move(shape), dtype, device, allocator, stream));
  WEFT_RETURN_IF_ERROR(t.Zero(stream));
  return t;
}

absl::StatusOr<Tensor> Tensor::FromFloats(absl::Span<const float> values, Shape shape,
                                          DType dtype) {
  if (NumElements(shape) != static_cast<int64_t>(values.size())) {
    return InvalidArgument(absl::StrCat(values.size(), " values for shape ", ShapeString(shape)),
                           absl::StrCat(NumElements(shape), " values"));
  }
  if (!IsFloatingPoint(dtype)) {
    return InvalidArgument(absl::StrCat("FromFloats into ", DTypeName(dtype)),
                           "a floating-point dtype");
  }
  Tensor src = FromBlob(const_cast<float*>(values.data()), shape, DType::kF32);
  WEFT_ASSIGN_OR_RETURN(Tensor t, Empty(std::move(shape), dtype));
  WEFT_RETURN_IF_ERROR(t.CopyFrom(src));
  return t;
}

Tensor Tensor::FromBlob(void* data, Shape shape, DType dtype, Device device) {
  Tensor t;
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  t.storage_ = std::make_shared<Storage>(data, bytes, device, nullptr);
  t.strides_ = ContiguousStrides(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  return t;
}

int Tensor::NormalizeDim(int d) const {
  const int n = ndim();
  WEFT_CHECK(d >= -n && d < n) << "dim " << d << " out of range for rank " << n;
  return d < 0 ? d + n : d;
}

bool Tensor::is_contiguous() const { return AsStridedView().contiguous(); }

void* Tensor::raw_data() const {
  WEFT_CHECK(defined()) << "data access on an undefined tensor";
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(DTypeSize(dtype_));
}

Tensor Tensor::View(Shape shape) const {
  WEFT_CHECK(is_contiguous()) << "View of a non-contiguous tensor " << DebugString()
                              << "; call Contiguous() first";
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      WEFT_CHECK(infer < 0) << "View: more than one -1 in " << ShapeString(shape);
      infer = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    WEFT_CHECK(known > 0 && numel() % known == 0)
        << "View: cannot infer -1 in " << ShapeString(shape) << " from " << numel();
    shape[infer] = numel() / known;
  }
  WEFT_CHECK_EQ(NumElements(shape), numel()) << "View " << ShapeString(shape) << " of "
                                             << ShapeString(shape_);
  Tensor t = *this;
  t.strides_ = ContiguousStrides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::Slice(int dim, int64_t start, int64_t end) const {
  dim = NormalizeDim(dim);
  WEFT_CHECK(0 <= start && start <= end && end <= shape_[dim])
      << "Slice [" << start << ", " << end << ") of dim " << dim << " size " << shape_[dim];
  Tensor t = *this;
  t.offset_ += start * strides_[dim];
  t.shape_[dim] = end - start;
  return t;
}

Tensor Tensor::Select(int dim, int64_t index) const {
  dim = NormalizeDim(dim);
  WEFT_CHECK(0 <= index && index < shape_[dim]) << "Select " << index << " of " << shape_[dim];
  Tensor t = *this;
  t.offset_ += index * strides_[dim];
  t.shape_.erase(t.shape_.begin() + dim);
  t.strides_.erase(t.strides_.begin() + dim);
  return t;
}

Tensor Tensor::Transpose(int dim0, int dim1) const {
  dim0 = NormalizeDim(dim0);
  dim1 = NormalizeDim(dim1);
  Tensor t = *this;
  std::swap(t.shape_[dim0], t.shape_[dim1]);
  std::swap(t.strides_[dim0], t.strides_[dim1]);
  return t;
}

Tensor Tensor::Permute(absl::Span<const int> order) const {
  WEFT_CHECK_EQ(static_cast<int>(order.size()), ndim());
  std::vector<bool> seen(ndim(), false);
  Tensor t = *this;
  for (int i = 0; i < ndim(); ++i) {
    const int src = NormalizeDim(order[i]);
    WEFT_CHECK(!seen[src]) << "Permute: dim " << src << " repeated";
    seen[src] = true;
    t.shape_[i] = shape_[src];
    t.strides_[i] = strides_[src];
  }
  return t;
}

StridedView Tensor::AsStridedView() const {
  StridedView v;
  v.data = defined() ? raw_data() : nullptr;
  v.dtype = dtype_;
  v.ndim = ndim();
  for (int i = 0; i < v.ndim; ++i) {
    v.shape[i] = shape_[i];
    v.strides[i] = strides_[i];
  }
  return v;
}

absl::StatusOr<Tensor> Tensor::Contiguous(NativeStream stream) const {
  if (is_contiguous()) return *this;
  return Clone(stream);
}

absl::StatusOr<Tensor> Tensor::Clone(NativeStream stream) const {
  Allocator* allocator = storage_->allocator();
  if (allocator != nullptr) allocator = allocator->ForCopies();
  WEFT_ASSIGN_OR_RETURN(Tensor t, Empty(shape_, dtype_, device(), allocator, stream));
  WEFT_RETURN_IF_ERROR(t.CopyFrom(*this, stream));
  return t;
}

absl::StatusOr<Tensor> Tensor::ToDType(DType dtype, NativeStream stream) const {
  WEFT_ASSIGN_OR_RETURN(Tensor t, Empty(shape_, dtype, device(), nullptr, stream));
  WEFT_RETURN_IF_ERROR(t.CopyFrom(*this, stream));
  return t;
}

absl::StatusOr<Tensor> Tensor::To(Device device, NativeStream stream, bool async,
                                  Allocator* allocator) const {
  WEFT_ASSIGN_OR_RETURN(Tensor t, Empty(shape_, dtype_, device, allocator, stream));
  WEFT_RETURN_IF_ERROR(t.CopyFrom(*this, stream, async));
  return t;
}

absl::Status Tensor::CopyFrom(const Tensor& src, NativeStream stream, bool async) {
  if (!defined() || !src.defined()) {
    return InvalidArgument("CopyFrom with an undefined tensor", "two allocated tensors");
  }
  if (shape_ != src.shape_) {
    return InvalidArgument(absl::StrCat("CopyFrom shape ", ShapeString(src.shape_), " into ",
                                        ShapeString(shape_)),
                           "equal shapes", "View or Slice the tensors to match first");
  }
  if (numel() == 0) return absl::OkStatus();
  const Device dst_dev = device(), src_dev = src.device();
  if (dst_dev == src_dev) {
    WEFT_ASSIGN_OR_RETURN(DeviceBackend * backend, GetDeviceBackend(dst_dev.type));
    if (dtype_ == src.dtype_ && is_contiguous() && src.is_contiguous()) {
      return backend->Copy(raw_data(), dst_dev, src.raw_data(), src_dev, nbytes(), stream,
                           async);
    }
    return backend->CopyStrided(dst_dev.index, AsStridedView(), src.AsStridedView(), stream);
  }
  if (dtype_ != src.dtype_) {
    return InvalidArgument(absl::StrCat("copy from ", DTypeName(src.dtype_), " on ",
                                        src_dev.ToString(), " to ", DTypeName(dtype_), " on ",
                                        dst_dev.ToString()),
                           "the same dtype when copying across devices",
                           "convert with ToDType on one side first");
  }
  // Across devices the copy engine moves contiguous bytes; stage strided
  // data in the source device's default memory: the source's own allocator
  // may lend one buffer only (a loader's batch-ring slot).
  Tensor packed_src = src;
  if (!src.is_contiguous()) {
    WEFT_ASSIGN_OR_RETURN(packed_src, Empty(src.shape_, src.dtype_, src_dev, nullptr, stream));
    WEFT_RETURN_IF_ERROR(packed_src.CopyFrom(src, stream));
  }
  const DeviceType accel = dst_dev.is_cpu() ? src_dev.type : dst_dev.type;
  WEFT_ASSIGN_OR_RETURN(DeviceBackend * backend, GetDeviceBackend(accel));
  if (is_contiguous()) {
    return backend->Copy(raw_data(), dst_dev, packed_src.raw_data(), src_dev, nbytes(), stream,
                         async);
  }
  WEFT_ASSIGN_OR_RETURN(Tensor staged, Empty(shape_, dtype_, dst_dev, nullptr, stream));
  WEFT_RETURN_IF_ERROR(backend->Copy(staged.raw_data(), dst_dev, packed_src.raw_data(), src_dev,
                                     nbytes(), stream, async));
  return CopyFrom(staged, stream);
}

absl::Status Tensor::Zero(NativeStream stream) {
  if (numel() == 0) return absl::OkStatus();
  WEFT_ASSIGN_OR_RETURN(DeviceBackend * backend, GetDeviceBackend(device().type));
  if (is_contiguous()) return backend->Memset(device().index, raw_data(), 0, nbytes(), stream);
  WEFT_ASSIGN_OR_RETURN(Tensor zeros, Zeros(shape_, dtype_, device(), nullptr, stream));
  return CopyFrom(zeros, stream);
}

absl::StatusOr<std::vector<float>> Tensor::ToFloats() const {
  if (!IsFloatingPoint(dtype_)) {
    return InvalidArgument(absl::StrCat("ToFloats on a ", DTypeName(dtype_), " tensor"),
                           "a floating-point tensor");
  }
  Tensor host = *this;
  if (!device().is_cpu()) {
    WEFT_ASSIGN_OR_RETURN(host, To(Device::Cpu()));
  }
  std::vector<float> out(static_cast<size_t>(numel()));
  Tensor dst = FromBlob(out.data(), shape_, DType::kF32);
  WEFT_RETURN_IF_ERROR(dst.CopyFrom(host));
  return out;
}

std::string Tensor::DebugString() const {
  if (!defined()) return "Tensor(undefined)";
  return absl::StrCat("Tensor(", DTypeName(dtype_), ShapeString(shape_), " on ",
                      device().ToString(), is_contiguous() ? "" : ", strided", ")");
}

}  // namespace weft
