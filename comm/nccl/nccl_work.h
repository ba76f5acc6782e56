// NcclWork: the Work handle of one NCCL op, completed by a CUDA event
// recorded on the group's comm stream after the op.
//
// Wait is stream-ordered: it makes the caller's stream (options.stream of
// the op) wait for the event and returns at once, so the host never
// blocks. Synchronize blocks the host until the event completes, polling the
// group's health so a watchdog abort ends the wait too. The work keeps its
// tensors alive until the op has finished.
#ifndef WEFT_COMM_NCCL_NCCL_WORK_H_
#define WEFT_COMM_NCCL_NCCL_WORK_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "comm/process_group/work.h"
#include "core/tensor/tensor.h"

namespace weft::comm {

class NcclWork final : public Work {
 public:
  // Takes ownership of `done`.
  NcclWork(OpInfo info, std::shared_ptr<GroupHealth> health, int device, cudaEvent_t done,
           cudaStream_t caller_stream, std::vector<Tensor> keep_alive);
  ~NcclWork() override;

  bool IsCompleted() const override;
  // Non-blocking poll of the end event: OK(true) done, OK(false) running.
  absl::StatusOr<bool> Query() const;
  // Drops the tensors once the op is known to be finished (watchdog).
  void Release();

 protected:
  absl::Status DoWait(absl::Duration timeout) override;
  absl::Status DoSynchronize(absl::Duration timeout) override;

 private:
  const std::shared_ptr<GroupHealth> health_;
  const int device_;
  cudaEvent_t done_;
  const cudaStream_t caller_stream_;
  std::vector<Tensor> keep_alive_;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_NCCL_NCCL_WORK_H_
