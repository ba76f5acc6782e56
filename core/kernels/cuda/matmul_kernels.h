// Kernels that complete cuBLASLt GEMMs: the deterministic column sum behind
// BiasGrad (and the bias gradients cuBLASLt has no fused epilogue for), and
// unfused epilogues used when
// cuBLASLt has no algorithm for a fused one (shape, dtype or alignment).
// Pointers are device memory on the current device; dtypes kF32 or kBF16.
#ifndef WEFT_CORE_KERNELS_CUDA_MATMUL_KERNELS_H_
#define WEFT_CORE_KERNELS_CUDA_MATMUL_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "core/tensor/dtype.h"

namespace weft::cuda {

// Floats of device scratch LaunchColumnSum needs for a (rows, cols) source.
int64_t ColumnSumScratchFloats(int64_t rows, int64_t cols);

// dst (cols) += sum over rows of src (rows, cols). Deterministic (fixed
// order, no atomics). `scratch` holds ColumnSumScratchFloats floats.
absl::Status LaunchColumnSum(void* dst, DType dst_dtype, const void* src, DType src_dtype,
                             int64_t rows, int64_t cols, float* scratch, cudaStream_t stream);

// out (rows, cols) += bias (cols), broadcast over rows.
absl::Status LaunchAddBias(void* out, DType out_dtype, const void* bias, DType bias_dtype,
                           int64_t rows, int64_t cols, cudaStream_t stream);

// aux = aux + bias (rounded to aux's dtype); out = gelu(aux). aux holds the
// plain GEMM result on entry; out and aux share a dtype.
absl::Status LaunchBiasGelu(void* out, void* aux, DType dtype, const void* bias,
                            DType bias_dtype, int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_MATMUL_KERNELS_H_
