#include "core/tensor/cuda/nccl_check.h"

#include "absl/strings/str_cat.h"

namespace weft {

absl::Status NcclError(ncclResult_t err, const char* expr, const char* file, int line) {
  const char* hint = "set NCCL_DEBUG=INFO for details";
  switch (err) {
    case ncclSystemError:
      hint = "a system call or network operation failed: check NCCL_SOCKET_IFNAME and that "
             "all ranks can reach each other";
      break;
    case ncclRemoteError:
      hint = "another rank failed or disconnected: check its log";
      break;
    case ncclInvalidUsage:
      hint = "all ranks must call the same collectives in the same order with matching sizes";
      break;
    default:
      break;
  }
  return absl::InternalError(absl::StrCat(file, ":", line, ": ", expr, " failed: ",
                                          ncclGetErrorString(err), " (", ncclGetLastError(nullptr),
                                          "). Hint: ", hint));
}

}  // namespace weft
