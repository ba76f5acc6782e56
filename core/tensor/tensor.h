// Tensor: a typed, strided view of shared device or host storage.
//
// Views (View, Slice, Select, Transpose, Permute) share storage and never
// copy. Contiguous, Clone, To and ToDType make new storage. Copies between
// devices go through the device backend; with a stream and async=true they
// are ordered on that stream and the host does not wait (the host side
// should then come from PinnedHostAllocator()).
//
// View functions abort on misuse (programmer error); functions that
// allocate or copy return absl::Status because memory and devices fail.
#ifndef WEFT_CORE_TENSOR_TENSOR_H_
#define WEFT_CORE_TENSOR_TENSOR_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/base/check.h"
#include "core/tensor/allocator.h"
#include "core/tensor/device.h"
#include "core/tensor/dtype.h"
#include "core/tensor/strided_view.h"

namespace weft {

using Shape = absl::InlinedVector<int64_t, 4>;

std::string ShapeString(absl::Span<const int64_t> shape);  // "[2, 3]"
int64_t NumElements(absl::Span<const int64_t> shape);

// Owns one allocation (or wraps external memory without owning it).
class Storage {
 public:
  Storage(void* data, size_t bytes, Device device, Allocator* allocator)
      : data_(data), bytes_(bytes), device_(device), allocator_(allocator) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  Allocator* allocator() const { return allocator_; }  // nullptr: not owned
  bool pinned() const { return allocator_ != nullptr && allocator_->pinned(); }

 private:
  void* data_;
  size_t bytes_;
  Device device_;
  Allocator* allocator_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false

  // Uninitialized storage. `allocator` defaults to DefaultAllocator(device);
  // `stream` is the stream the memory will be used on (CUDA caching).
  static absl::StatusOr<Tensor> Empty(Shape shape, DType dtype, Device device = Device::Cpu(),
                                      Allocator* allocator = nullptr,
                                      NativeStream stream = nullptr);
  static absl::StatusOr<Tensor> Zeros(Shape shape, DType dtype, Device device = Device::Cpu(),
                                      Allocator* allocator = nullptr,
                                      NativeStream stream = nullptr);
  // A host tensor holding `values` (converted from float for bf16/f16).
  static absl::StatusOr<Tensor> FromFloats(absl::Span<const float> values, Shape shape,
                                           DType dtype = DType::kF32);
  template <typename T>
  static absl::StatusOr<Tensor> FromVector(absl::Span<const T> values, Shape shape);
  // Wraps memory the caller owns and keeps alive. Never freed by the tensor.
  static Tensor FromBlob(void* data, Shape shape, DType dtype, Device device = Device::Cpu());

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[NormalizeDim(i)]; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::Cpu(); }
  int64_t numel() const { return NumElements(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }
  int64_t offset() const { return offset_; }  // in elements, into storage
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  void* raw_data() const;
  template <typename T>
  T* data() const {
    WEFT_CHECK(DTypeOf<T>::value == dtype_)
        << "data<" << DTypeName(DTypeOf<T>::value) << "> on a " << DTypeName(dtype_) << " tensor";
    return static_cast<T*>(raw_data());
  }

  // Views. View needs a contiguous tensor; one dimension may be -1.
  Tensor View(Shape shape) const;
  Tensor Flatten() const { return View({numel()}); }
  Tensor Slice(int dim, int64_t start, int64_t end) const;
  Tensor Select(int dim, int64_t index) const;  // drops `dim`
  Tensor Transpose(int dim0, int dim1) const;
  Tensor Permute(absl::Span<const int> order) const;

  // New storage on the same device.
  absl::StatusOr<Tensor> Contiguous(NativeStream stream = nullptr) const;
  absl::StatusOr<Tensor> Clone(NativeStream stream = nullptr) const;
  absl::StatusOr<Tensor> ToDType(DType dtype, NativeStream stream = nullptr) const;
  // A contiguous copy on `device` (same dtype).
  absl::StatusOr<Tensor> To(Device device, NativeStream stream = nullptr, bool async = false,
                            Allocator* allocator = nullptr) const;

  // Copies `src` into this tensor's elements (same shape). Within a device
  // the dtype may differ (converted, round to nearest even); across devices
  // it must match.
  absl::Status CopyFrom(const Tensor& src, NativeStream stream = nullptr, bool async = false);
  absl::Status Zero(NativeStream stream = nullptr);

  // Host copy of the elements, row-major, as float (any float dtype) or T.
  absl::StatusOr<std::vector<float>> ToFloats() const;
  template <typename T>
  absl::StatusOr<std::vector<T>> ToVector() const;

  StridedView AsStridedView() const;
  std::string DebugString() const;  // "Tensor(f32[2, 3] on cpu)"

 private:
  int NormalizeDim(int d) const;
  static Shape ContiguousStrides(absl::Span<const int64_t> shape);

  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;
  Shape shape_;
  Shape strides_;
  DType dtype_ = DType::kF32;
};

template <typename T>
absl::StatusOr<Tensor> Tensor::FromVector(absl::Span<const T> values, Shape shape) {
  if (NumElements(shape) != static_cast<int64_t>(values.size())) {
    return absl::InvalidArgumentError("FromVector: " + std::to_string(values.size()) +
                                      " values for shape " + ShapeString(shape));
  }
  auto t = Empty(std::move(shape), DTypeOf<T>::value);
  if (!t.ok()) return t.status();
  std::copy(values.begin(), values.end(), t->template data<T>());
  return t;
}

template <typename T>
absl::StatusOr<std::vector<T>> Tensor::ToVector() const {
  WEFT_CHECK(DTypeOf<T>::value == dtype_) << "ToVector type mismatch";
  absl::StatusOr<Tensor> host = device().is_cpu() ? Contiguous() : To(Device::Cpu());
  if (!host.ok()) return host.status();
  const T* p = host->template data<T>();
  return std::vector<T>(p, p + host->numel());
}

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_TENSOR_H_
