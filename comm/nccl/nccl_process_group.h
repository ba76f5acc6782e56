// NcclProcessGroup: the CUDA backend, NCCL collectives on a dedicated
// comm stream.
//
// Creation: rank 0 makes the ncclUniqueId and publishes it through the store;
// every rank then initializes a non-blocking communicator
// (ncclCommInitRankConfig with blocking = 0) and polls ncclCommGetAsyncError
// until it is ready or the group timeout expires (then ncclCommAbort and
// DeadlineExceeded), so a missing rank never hangs creation.
//
// Ops: each op makes the comm stream wait (through an event) for the work
// already queued on options.stream, enqueues the NCCL call(s) on the comm
// stream and records an end event; Work::Wait makes options.stream wait
// for that event (stream-ordered, the host does not block) and
// Work::Synchronize blocks the host. Tensors used on the comm stream are
// recorded with their caching allocator so their memory is not reused early.
//
// Watchdog: a thread polls in-flight ops (op_watchdog.h). An op past its
// timeout, or an asynchronous NCCL error, breaks the group with the same rich
// error as the gloo backend and aborts the communicator (ncclCommAbort),
// which unblocks the GPU. With NcclOptions::exit_on_error (default) it then
// prints the error and exits the process with code 1. The abort never waits
// for a Launch that is waiting on a stuck enqueue (abortable_comm.h).
//
// Destruction is bounded: in-flight ops and the communicator's finalize
// share a grace of a few seconds (kShutdownGrace in the .cc), after which the
// communicator is aborted instead; the ops' own timeouts do not apply.
//
// Compiled only when the CUDA toolkit is present; link //comm/nccl (an
// alwayslink target) to make CreateProcessGroup("nccl", ...) available.
#ifndef WEFT_COMM_NCCL_NCCL_PROCESS_GROUP_H_
#define WEFT_COMM_NCCL_NCCL_PROCESS_GROUP_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/nccl/abortable_comm.h"
#include "comm/nccl/nccl_work.h"
#include "comm/nccl/op_watchdog.h"
#include "comm/process_group/process_group.h"
#include "comm/store/store.h"
#include "comm/util/deadline.h"

namespace weft::comm {

class NcclProcessGroup final : public ProcessGroup {
 public:
  static absl::StatusOr<std::shared_ptr<ProcessGroup>> Create(std::shared_ptr<Store> store,
                                                              int rank, int size,
                                                              const ProcessGroupOptions& options);
  ~NcclProcessGroup() override;

  // The stream NCCL kernels run on (for profilers and tests).
  cudaStream_t comm_stream() const { return comm_stream_; }

 protected:
  std::shared_ptr<Work> DoAllReduce(const OpContext& ctx, const Tensor& tensor,
                                    ReduceOp op) override;
  std::shared_ptr<Work> DoReduceScatter(const OpContext& ctx, const Tensor& input,
                                        const Tensor& output, ReduceOp op) override;
  std::shared_ptr<Work> DoAllGather(const OpContext& ctx, const Tensor& input,
                                    const Tensor& output) override;
  std::shared_ptr<Work> DoAllGatherV(const OpContext& ctx, const Tensor& input,
                                     std::vector<Tensor> outputs) override;
  std::shared_ptr<Work> DoBroadcast(const OpContext& ctx, const Tensor& tensor,
                                    int root) override;
  std::shared_ptr<Work> DoAllToAllV(const OpContext& ctx, const Tensor& input,
                                    std::vector<int64_t> input_counts, const Tensor& output,
                                    std::vector<int64_t> output_counts) override;
  std::shared_ptr<Work> DoBatchSendRecv(const OpContext& ctx, std::vector<P2POp> ops) override;
  std::shared_ptr<Work> DoBarrier(const OpContext& ctx) override;

 private:
  NcclProcessGroup(int rank, int size, int device, const ProcessGroupOptions& options);

  absl::Status Init(Store& store, const Deadline& deadline);
  // The NCCL calls behind comm_handle_.
  CommOps MakeCommOps();
  // Orders the comm stream after ctx.stream, runs `enqueue` (NCCL calls on
  // comm_stream_), waits for the non-blocking enqueue to settle, records the
  // end event and hands the op to the watchdog.
  // `enqueue` may add temporaries that must outlive the op to `keep`.
  std::shared_ptr<Work> Launch(const OpContext& ctx, std::vector<Tensor> tensors,
                               const std::function<absl::Status(std::vector<Tensor>* keep)>& enqueue);
  // Breaks the group, aborts the communicator and, if configured, exits.
  // Called by the watchdog; never waits for Launch.
  void Fail(const absl::Status& error);
  // The watchdog's view of failures found outside it (a Synchronize that
  // gave up): the group's error until the communicator is aborted.
  absl::Status UnhandledGroupError();

  const int device_;
  const bool exit_on_error_;
  const bool high_priority_stream_;
  // Serializes Launch, so this rank enqueues ops in issue order. The
  // watchdog, Fail and the destructor never take it.
  std::mutex launch_mu_;
  ncclComm_t comm_ = nullptr;  // used only under comm_handle_ (its CommOps and Run)
  AbortableComm comm_handle_;
  cudaStream_t comm_stream_ = nullptr;
  int* barrier_buffer_ = nullptr;  // one device int for Barrier
  std::unique_ptr<OpWatchdog> watchdog_;  // started once Init succeeded
};

}  // namespace weft::comm

#endif  // WEFT_COMM_NCCL_NCCL_PROCESS_GROUP_H_
