// Status-returning check for NCCL calls, with file:line and a hint.
#ifndef WEFT_CORE_TENSOR_CUDA_NCCL_CHECK_H_
#define WEFT_CORE_TENSOR_CUDA_NCCL_CHECK_H_

#include <nccl.h>

#include "absl/status/status.h"

namespace weft {

absl::Status NcclError(ncclResult_t err, const char* expr, const char* file, int line);

}  // namespace weft

// ncclInProgress is not an error: non-blocking communicators return it while
// an operation is still being set up.
#define WEFT_NCCL_RETURN_IF_ERROR(expr)                                    \
  do {                                                                     \
    const ncclResult_t weft_nccl_err_ = (expr);                            \
    if (weft_nccl_err_ != ncclSuccess && weft_nccl_err_ != ncclInProgress) { \
      return ::weft::NcclError(weft_nccl_err_, #expr, __FILE__, __LINE__); \
    }                                                                      \
  } while (0)

#endif  // WEFT_CORE_TENSOR_CUDA_NCCL_CHECK_H_
