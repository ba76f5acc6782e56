#include "comm/nccl/nccl_work.h"

#include "absl/strings/str_cat.h"
#include "comm/util/deadline.h"
#include "core/tensor/cuda/cuda_check.h"
#include "core/tensor/cuda/device_guard.h"

namespace weft::comm {

NcclWork::NcclWork(OpInfo info, std::shared_ptr<GroupHealth> health, int device,
                   cudaEvent_t done, cudaStream_t caller_stream, std::vector<Tensor> keep_alive)
    : Work(std::move(info)),
      health_(std::move(health)),
      device_(device),
      done_(done),
      caller_stream_(caller_stream),
      keep_alive_(std::move(keep_alive)) {}

NcclWork::~NcclWork() {
  cuda::DeviceGuard guard(device_);
  (void)cudaEventDestroy(done_);
}

absl::StatusOr<bool> NcclWork::Query() const {
  cuda::DeviceGuard guard(device_);
  const cudaError_t err = cudaEventQuery(done_);
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) return false;
  return CudaError(err, "cudaEventQuery(done)", __FILE__, __LINE__);
}

bool NcclWork::IsCompleted() const {
  if (health_->broken()) return true;
  absl::StatusOr<bool> done = Query();
  return !done.ok() || *done;
}

void NcclWork::Release() { keep_alive_.clear(); }

absl::Status NcclWork::DoWait(absl::Duration) {
  if (absl::Status h = health_->status(); !h.ok()) return h;
  cuda::DeviceGuard guard(device_);
  WEFT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(caller_stream_, done_, 0));
  return absl::OkStatus();
}

absl::Status NcclWork::DoSynchronize(absl::Duration timeout) {
  const Deadline deadline = Deadline::After(timeout);
  absl::Duration backoff = absl::Microseconds(20);
  while (true) {
    if (absl::Status h = health_->status(); !h.ok()) return h;
    absl::StatusOr<bool> done = Query();
    if (!done.ok()) {
      absl::Status error = info().Error(absl::StatusCode::kInternal, done.status().message());
      health_->MarkBroken(error);
      return error;
    }
    if (*done) return health_->status();
    if (deadline.Expired()) {
      absl::Status error = info().Error(
          absl::StatusCode::kDeadlineExceeded,
          absl::StrCat("Synchronize gave up after ", absl::FormatDuration(timeout),
                       " while the op was still running on the GPU"));
      health_->MarkBroken(error);
      return error;
    }
    absl::SleepFor(std::min(backoff, deadline.Remaining()));
    backoff = std::min(backoff * 2, absl::Milliseconds(1));
  }
}

}  // namespace weft::comm
