// Inverted dropout with a counter-based mask: element i is kept when
// DropoutKeep(key, i, p) (core/kernels/philox.h), so the mask depends only
// on the key and i, not on the launch shape or device, and matches the CPU
// reference bit for bit. Kept elements are scaled by
// 1 / (1 - p); p in [0, 1) is checked by the caller.
#ifndef WEFT_CORE_KERNELS_CUDA_DROPOUT_H_
#define WEFT_CORE_KERNELS_CUDA_DROPOUT_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "core/kernels/philox.h"
#include "core/tensor/dtype.h"

namespace weft::cuda {

// out = mask(x) * x / (1 - p). Backward is the same call on dy. out may
// alias x.
absl::Status LaunchDropout(void* out, const void* x, DType dtype, int64_t n, float p,
                           const DropoutKey& key, cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_DROPOUT_H_
