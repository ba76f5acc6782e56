// Status-returning checks for CUDA runtime and cuBLAS calls. Messages carry
// the failing expression, file:line, the library's error text and a hint.
//
//   WEFT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(...));
//   WEFT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(...));
//   WEFT_CUDA_RETURN_IF_ERROR(cudaGetLastError());  // after a kernel launch
#ifndef WEFT_CORE_TENSOR_CUDA_CUDA_CHECK_H_
#define WEFT_CORE_TENSOR_CUDA_CUDA_CHECK_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace weft {

absl::Status CudaError(cudaError_t err, const char* expr, const char* file, int line);
absl::Status CublasError(cublasStatus_t err, const char* expr, const char* file, int line);

}  // namespace weft

#define WEFT_CUDA_RETURN_IF_ERROR(expr)                                        \
  do {                                                                         \
    const cudaError_t weft_cuda_err_ = (expr);                                 \
    if (weft_cuda_err_ != cudaSuccess) {                                       \
      return ::weft::CudaError(weft_cuda_err_, #expr, __FILE__, __LINE__);     \
    }                                                                          \
  } while (0)

#define WEFT_CUBLAS_RETURN_IF_ERROR(expr)                                      \
  do {                                                                         \
    const cublasStatus_t weft_cublas_err_ = (expr);                            \
    if (weft_cublas_err_ != CUBLAS_STATUS_SUCCESS) {                           \
      return ::weft::CublasError(weft_cublas_err_, #expr, __FILE__, __LINE__); \
    }                                                                          \
  } while (0)

#endif  // WEFT_CORE_TENSOR_CUDA_CUDA_CHECK_H_
