// Launchers for the elementwise kernels: GELU (tanh approximation) and
// SwiGLU forward and backward, Add and Scale. Pointers are device memory on
// the current device; dtypes are kF32 or kBF16. Shapes are flat element
// counts (SwiGLU: rows and h): callers (CudaKernelOps) have already checked
// that operands agree.
#ifndef WEFT_CORE_KERNELS_CUDA_ELEMENTWISE_H_
#define WEFT_CORE_KERNELS_CUDA_ELEMENTWISE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/tensor/dtype.h"

namespace weft::cuda {

// out = gelu(x). out may alias x.
absl::Status LaunchGeluForward(void* out, const void* x, DType dtype, int64_t n,
                               cudaStream_t stream);
// dx = dy * gelu'(x). dx may alias dy.
absl::Status LaunchGeluBackward(void* dx, const void* dy, const void* x, DType dtype, int64_t n,
                                cudaStream_t stream);
// SwiGLU over rows of gate_up (rows, 2h) = [gate | up]:
// out (rows, h) = silu(gate) * up.
absl::Status LaunchSwiGluForward(void* out, const void* gate_up, DType dtype, int64_t rows,
                                 int64_t h, cudaStream_t stream);
// dgate_up (rows, 2h) = [dout * up * silu'(gate) | dout * silu(gate)],
// overwritten. dgate_up may alias gate_up.
absl::Status LaunchSwiGluBackward(void* dgate_up, const void* dout, const void* gate_up,
                                  DType dtype, int64_t rows, int64_t h, cudaStream_t stream);
// out = a + b, each operand f32 or bf16 independently; out may alias a or b.
absl::Status LaunchAdd(void* out, DType out_dtype, const void* a, DType a_dtype, const void* b,
                       DType b_dtype, int64_t n, cudaStream_t stream);
// x *= scale.
absl::Status LaunchScale(void* x, DType dtype, float scale, int64_t n, cudaStream_t stream);
// Zeroes ptrs[i][0, bytes[i]) for every i, 64 buffers per launch (16-byte
// stores where a buffer is 16-byte aligned).
absl::Status LaunchZeroMany(absl::Span<void* const> ptrs, absl::Span<const int64_t> bytes,
                            cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_ELEMENTWISE_H_
