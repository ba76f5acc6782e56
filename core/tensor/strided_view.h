// StridedView: a plain description of a strided tensor region, used by copy
// and cast kernels on every backend so they need not depend on Tensor.
#ifndef WEFT_CORE_TENSOR_STRIDED_VIEW_H_
#define WEFT_CORE_TENSOR_STRIDED_VIEW_H_

#include <cstdint>

#include "core/tensor/dtype.h"

namespace weft {

inline constexpr int kMaxDims = 8;

struct StridedView {
  void* data = nullptr;  // points at element [0, 0, ...]
  DType dtype = DType::kF32;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};  // in elements

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  bool contiguous() const {
    // An empty tensor has no elements to misplace, whatever its strides.
    for (int i = 0; i < ndim; ++i) {
      if (shape[i] == 0) return true;
    }
    int64_t expected = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && strides[i] != expected) return false;
      expected *= shape[i];
    }
    return true;
  }
};

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_STRIDED_VIEW_H_
