// Strided copy with dtype conversion on a CUDA stream (round to nearest even).
#ifndef WEFT_CORE_TENSOR_CUDA_COPY_KERNELS_H_
#define WEFT_CORE_TENSOR_CUDA_COPY_KERNELS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "core/tensor/strided_view.h"

namespace weft::cuda {

// dst and src have equal shapes and live on the current device.
absl::Status LaunchCopyStrided(const StridedView& dst, const StridedView& src,
                               cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_TENSOR_CUDA_COPY_KERNELS_H_
