#include "core/tensor/cuda/cuda_check.h"

#include "absl/strings/str_cat.h"

namespace weft {
namespace {

const char* CudaHint(cudaError_t err) {
  switch (err) {
    case cudaErrorMemoryAllocation:
      return "the GPU is out of memory: lower micro_batch, enable recompute, or shard with "
             "--strategy=fsdp";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return "no usable GPU or driver: check nvidia-smi, or run with --device=cpu";
    case cudaErrorInvalidDevice:
      return "the device index is out of range: check CUDA_VISIBLE_DEVICES and LOCAL_RANK";
    case cudaErrorNoKernelImageForDevice:
      return "this binary has no code for the GPU's architecture: rebuild with its sm_XX "
             "in //tools/cuda:cuda.bzl DEFAULT_CUDA_ARCHS";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
      return "a kernel faulted: rerun under compute-sanitizer to find it; the context is "
             "now unusable";
    default:
      return "see the CUDA runtime documentation for this error code";
  }
}

}  // namespace

absl::Status CudaError(cudaError_t err, const char* expr, const char* file, int line) {
  const absl::StatusCode code = err == cudaErrorMemoryAllocation
                                    ? absl::StatusCode::kResourceExhausted
                                    : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(file, ":", line, ": ", expr, " failed: ",
                                         cudaGetErrorName(err), " (", cudaGetErrorString(err),
                                         "). Hint: ", CudaHint(err)));
}

absl::Status CublasError(cublasStatus_t err, const char* expr, const char* file, int line) {
  const char* hint = "check operand shapes, leading dimensions and alignment";
  if (err == CUBLAS_STATUS_NOT_SUPPORTED) {
    hint = "no cuBLASLt algorithm for this layout/epilogue: check dtypes, 16-byte alignment "
           "and that dims are multiples of 8 for bf16";
  } else if (err == CUBLAS_STATUS_ALLOC_FAILED) {
    hint = "cuBLASLt could not allocate workspace: the GPU is out of memory";
  }
  return absl::InternalError(absl::StrCat(file, ":", line, ": ", expr, " failed: ",
                                          cublasLtGetStatusName(err), " (",
                                          cublasLtGetStatusString(err), "). Hint: ", hint));
}

}  // namespace weft
