#include "comm/nccl/nccl_process_group.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "comm/nccl/abortable_poll.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/tensor/cuda/cuda_check.h"
#include "core/tensor/cuda/device_guard.h"
#include "core/tensor/cuda/nccl_check.h"

namespace weft::comm {
namespace {

constexpr char kUniqueIdKey[] = "nccl_unique_id";
constexpr absl::Duration kWatchdogPeriod = absl::Milliseconds(20);
// The destructor's bound: in-flight ops and the finalize share this grace,
// then the communicator is aborted; the comm stream then gets kStreamDrain.
constexpr absl::Duration kShutdownGrace = absl::Seconds(10);
constexpr absl::Duration kStreamDrain = absl::Seconds(1);

ncclDataType_t NcclDataType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    case DType::kI32:
      return ncclInt32;
    case DType::kI64:
      return ncclInt64;
    case DType::kU16:
      break;  // moves as bytes; never reduced (checked by ProcessGroup)
  }
  return ncclUint8;
}

ncclRedOp_t NcclRedOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  return ncclSum;
}

// Polls until `stream` is idle; false if it is not by `deadline` (or the
// query fails).
bool StreamDrained(cudaStream_t stream, const Deadline& deadline) {
  static const std::atomic<bool> kNoAbort{false};
  return PollUntilDone(
             [stream]() -> absl::StatusOr<PollState> {
               const cudaError_t err = cudaStreamQuery(stream);
               if (err == cudaSuccess) return PollState::kDone;
               if (err == cudaErrorNotReady) return PollState::kInProgress;
               return CudaError(err, "cudaStreamQuery(comm_stream)", __FILE__, __LINE__);
             },
             deadline, kNoAbort)
      .ok();
}

bool Overlaps(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const char*>(a.raw_data());
  const auto* pb = static_cast<const char*>(b.raw_data());
  if (a.nbytes() == 0 || b.nbytes() == 0) return false;
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

}  // namespace

NcclProcessGroup::NcclProcessGroup(int rank, int size, int device,
                                   const ProcessGroupOptions& options)
    : ProcessGroup("nccl", options.name, rank, size, Device::Cuda(device), options.timeout),
      device_(device),
      exit_on_error_(options.nccl.exit_on_error),
      high_priority_stream_(options.nccl.high_priority_stream),
      comm_handle_(MakeCommOps()) {}

CommOps NcclProcessGroup::MakeCommOps() {
  return {
      .poll = [this]() -> absl::StatusOr<PollState> {
        if (comm_ == nullptr) return absl::FailedPreconditionError("no NCCL communicator");
        ncclResult_t state = ncclInProgress;
        const ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
        if (rc != ncclSuccess) return NcclError(rc, "ncclCommGetAsyncError", __FILE__, __LINE__);
        if (state == ncclSuccess) return PollState::kDone;
        if (state != ncclInProgress) {
          return NcclError(state, "NCCL operation (async)", __FILE__, __LINE__);
        }
        return PollState::kInProgress;
      },
      .finalize = [this]() -> absl::Status {
        if (comm_ == nullptr) return absl::FailedPreconditionError("no NCCL communicator");
        WEFT_NCCL_RETURN_IF_ERROR(ncclCommFinalize(comm_));
        return absl::OkStatus();
      },
      .destroy =
          [this] {
            cuda::DeviceGuard guard(device_);
            (void)ncclCommDestroy(comm_);
          },
      .abort =
          [this] {
            if (comm_ == nullptr) return;
            cuda::DeviceGuard guard(device_);
            (void)ncclCommAbort(comm_);
          },
  };
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> NcclProcessGroup::Create(
    std::shared_ptr<Store> store, int rank, int size, const ProcessGroupOptions& options) {
  int device = options.nccl.device;
  if (device < 0) WEFT_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  int count = 0;
  WEFT_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (device >= count) {
    return InvalidArgument(absl::StrCat("NCCL group '", options.name, "' asked for cuda:", device),
                           absl::StrCat("a device index below ", count, " on this host"),
                           "set NcclOptions.device to the local rank (LOCAL_RANK)");
  }
  std::shared_ptr<NcclProcessGroup> group(new NcclProcessGroup(rank, size, device, options));
  WEFT_RETURN_IF_ERROR(group->Init(*store, Deadline::After(options.timeout)));
  NcclProcessGroup* raw = group.get();
  group->watchdog_ = std::make_unique<OpWatchdog>(
      OpWatchdog::Hooks{
          .comm_error = [raw] { return raw->comm_handle_.AsyncError(); },
          .group_error = [raw] { return raw->UnhandledGroupError(); },
          .on_failure = [raw](const absl::Status& error) { raw->Fail(error); },
      },
      kWatchdogPeriod);
  return group;
}

absl::Status NcclProcessGroup::Init(Store& store, const Deadline& deadline) {
  cuda::DeviceGuard guard(device_);
  int least = 0, greatest = 0;
  WEFT_CUDA_RETURN_IF_ERROR(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  WEFT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithPriority(
      &comm_stream_, cudaStreamNonBlocking, high_priority_stream_ ? greatest : least));
  WEFT_CUDA_RETURN_IF_ERROR(cudaMalloc(&barrier_buffer_, sizeof(int)));
  WEFT_CUDA_RETURN_IF_ERROR(cudaMemset(barrier_buffer_, 0, sizeof(int)));

  ncclUniqueId id;
  if (rank() == 0) {
    WEFT_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
    WEFT_RETURN_IF_ERROR(
        store.Set(kUniqueIdKey, absl::string_view(reinterpret_cast<const char*>(&id), sizeof(id))));
  } else {
    absl::StatusOr<std::string> published = store.Get(kUniqueIdKey, deadline.Remaining());
    if (!published.ok()) {
      return Annotate(published.status(),
                      absl::StrCat("rank ", rank(), " waiting for rank 0's ncclUniqueId of group '",
                                   name(), "'"));
    }
    if (published->size() != sizeof(id)) {
      return Internal(absl::StrCat("the ncclUniqueId in the store has ", published->size(),
                                   " bytes"),
                      absl::StrCat(sizeof(id), " bytes written by rank 0 of the same build"));
    }
    std::memcpy(&id, published->data(), sizeof(id));
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init and enqueue return at once; we poll with a deadline
  config.commName = name().c_str();
  absl::Status ready = comm_handle_.Run([&]() -> absl::Status {
    WEFT_NCCL_RETURN_IF_ERROR(ncclCommInitRankConfig(&comm_, size(), id, rank(), &config));
    return absl::OkStatus();
  });
  if (ready.ok()) ready = comm_handle_.Await(deadline);
  if (!ready.ok()) {
    comm_handle_.Abort();
    if (ready.code() == absl::StatusCode::kDeadlineExceeded) {
      return DeadlineExceeded(
          absl::StrCat("the NCCL communicator of group '", name(), "' (rank ", rank(), " of ",
                       size(), ", cuda:", device_, ") was not ready within the timeout"),
          "every rank to create the group within its timeout",
          "a rank may have crashed or not started; set NCCL_DEBUG=INFO for NCCL's view");
    }
    return ready;
  }
  return absl::OkStatus();
}

void NcclProcessGroup::Fail(const absl::Status& error) {
  MarkBroken(error);
  comm_handle_.Abort();  // does not wait for a Launch stuck in its enqueue
  std::fprintf(stderr, "weft nccl watchdog: %s\n", health().ToString().c_str());
  if (exit_on_error_) {
    std::fprintf(stderr,
                 "weft nccl watchdog: aborted the communicator; exiting (set "
                 "NcclOptions.exit_on_error=false to keep running)\n");
    std::fflush(nullptr);
    std::_Exit(1);
  }
}

absl::Status NcclProcessGroup::UnhandledGroupError() {
  if (comm_handle_.abort_requested()) return absl::OkStatus();
  return health();
}

NcclProcessGroup::~NcclProcessGroup() {
  const Deadline grace = Deadline::After(kShutdownGrace);
  // Ops still running when the grace ends are aborted, not waited for.
  if (watchdog_ != nullptr && !watchdog_->Stop(grace)) comm_handle_.Abort();
  comm_handle_.Close(grace);  // finalize and destroy, or abort
  watchdog_.reset();
  cuda::DeviceGuard guard(device_);
  // The stream is retired, not destroyed. Tensors this group used stay
  // recorded on comm_stream_ in their caching allocator until they are freed,
  // which can be after the group is gone (the model outlives the parallel
  // state that reduced its gradients). Freeing them then records an event on
  // the stream, and on a destroyed handle that crashed ddp/zero teardown on an
  // H100. One idle stream per group is the price. The barrier int is freed
  // only once the stream is idle (cudaFree would wait for a stuck kernel).
  const bool drained =
      comm_stream_ == nullptr || StreamDrained(comm_stream_, Deadline::After(kStreamDrain));
  if (!drained) {
    std::fprintf(stderr,
                 "weft nccl: group '%s' still had work on its comm stream at shutdown; "
                 "leaving it behind\n",
                 name().c_str());
  }
  if (barrier_buffer_ != nullptr && drained) (void)cudaFree(barrier_buffer_);
}

std::shared_ptr<Work> NcclProcessGroup::Launch(
    const OpContext& ctx, std::vector<Tensor> tensors,
    const std::function<absl::Status(std::vector<Tensor>* keep)>& enqueue) {
  std::unique_lock<std::mutex> lock(launch_mu_);
  if (absl::Status h = health(); !h.ok()) {
    return MakeCompletedWork(
        ctx.info,
        Annotate(h, absl::StrCat(ctx.info.Describe(), " not started because the group broke earlier")));
  }
  cuda::DeviceGuard guard(device_);
  auto caller = static_cast<cudaStream_t>(ctx.stream);
  cudaEvent_t ready = nullptr;
  cudaEvent_t done = nullptr;
  absl::Status s = [&]() -> absl::Status {
    WEFT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    WEFT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    // The comm stream starts after everything already queued on the caller's.
    WEFT_CUDA_RETURN_IF_ERROR(cudaEventRecord(ready, caller));
    WEFT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(comm_stream_, ready, 0));
    for (const Tensor& t : tensors) {
      Allocator* allocator = t.storage()->allocator();
      if (allocator != nullptr) {
        WEFT_RETURN_IF_ERROR(allocator->RecordStream(t.storage()->data(), comm_stream_));
      }
    }
    WEFT_RETURN_IF_ERROR(comm_handle_.Run([&] { return enqueue(&tensors); }));
    // Polls without holding what Fail needs: an abort ends it at once.
    WEFT_RETURN_IF_ERROR(comm_handle_.Await(Deadline::After(ctx.info.timeout)));
    WEFT_CUDA_RETURN_IF_ERROR(cudaEventRecord(done, comm_stream_));
    return absl::OkStatus();
  }();
  if (ready != nullptr) (void)cudaEventDestroy(ready);  // released once it completes
  if (!s.ok()) {
    if (done != nullptr) (void)cudaEventDestroy(done);
    const absl::Status error = ctx.info.Error(s.code(), s.message());
    MarkBroken(error);
    comm_handle_.Abort();
    return MakeCompletedWork(ctx.info, error);
  }
  lock.unlock();
  auto work = std::make_shared<NcclWork>(ctx.info, health_state(), device_, done, caller,
                                         std::move(tensors));
  watchdog_->Track({
      .info = ctx.info,
      .deadline = Deadline::After(ctx.info.timeout),
      .finished = [work] { return work->Query(); },
      .release = [work] { work->Release(); },
  });
  return work;
}

std::shared_ptr<Work> NcclProcessGroup::DoAllReduce(const OpContext& ctx, const Tensor& tensor,
                                                    ReduceOp op) {
  if (tensor.numel() == 0) return MakeCompletedWork(ctx.info, absl::OkStatus());
  return Launch(ctx, {tensor}, [&](std::vector<Tensor>*) -> absl::Status {
    WEFT_NCCL_RETURN_IF_ERROR(ncclAllReduce(tensor.raw_data(), tensor.raw_data(), tensor.numel(),
                                            NcclDataType(tensor.dtype()), NcclRedOp(op), comm_,
                                            comm_stream_));
    return absl::OkStatus();
  });
}

std::shared_ptr<Work> NcclProcessGroup::DoReduceScatter(const OpContext& ctx,
                                                        const Tensor& input,
                                                        const Tensor& output, ReduceOp op) {
  if (output.numel() == 0) return MakeCompletedWork(ctx.info, absl::OkStatus());
  return Launch(ctx, {input, output}, [&](std::vector<Tensor>*) -> absl::Status {
    WEFT_NCCL_RETURN_IF_ERROR(ncclReduceScatter(input.raw_data(), output.raw_data(),
                                                output.numel(), NcclDataType(input.dtype()),
                                                NcclRedOp(op), comm_, comm_stream_));
    return absl::OkStatus();
  });
}

std::shared_ptr<Work> NcclProcessGroup::DoAllGather(const OpContext& ctx, const Tensor& input,
                                                    const Tensor& output) {
  if (input.nbytes() == 0) return MakeCompletedWork(ctx.info, absl::OkStatus());
  return Launch(ctx, {input, output}, [&](std::vector<Tensor>*) -> absl::Status {
    WEFT_NCCL_RETURN_IF_ERROR(ncclAllGather(input.raw_data(), output.raw_data(), input.nbytes(),
                                            ncclUint8, comm_, comm_stream_));
    return absl::OkStatus();
  });
}

std::shared_ptr<Work> NcclProcessGroup::DoAllGatherV(const OpContext& ctx, const Tensor& input,
                                                     std::vector<Tensor> outputs) {
  std::vector<Tensor> tensors = outputs;
  tensors.push_back(input);
  return Launch(ctx, std::move(tensors), [&](std::vector<Tensor>*) -> absl::Status {
    // One broadcast per rank handles uneven parts; grouped so they overlap.
    WEFT_NCCL_RETURN_IF_ERROR(ncclGroupStart());
    for (int r = 0; r < size(); ++r) {
      if (outputs[r].nbytes() == 0) continue;
      const void* send = r == rank() ? input.raw_data() : outputs[r].raw_data();
      const ncclResult_t rc = ncclBroadcast(send, outputs[r].raw_data(), outputs[r].nbytes(),
                                            ncclUint8, r, comm_, comm_stream_);
      if (rc != ncclSuccess && rc != ncclInProgress) {
        (void)ncclGroupEnd();
        return NcclError(rc, "ncclBroadcast", __FILE__, __LINE__);
      }
    }
    WEFT_NCCL_RETURN_IF_ERROR(ncclGroupEnd());
    return absl::OkStatus();
  });
}

std::shared_ptr<Work> NcclProcessGroup::DoBroadcast(const OpContext& ctx, const Tensor& tensor,
                                                    int root) {
  if (tensor.nbytes() == 0) return MakeCompletedWork(ctx.info, absl::OkStatus());
  return Launch(ctx, {tensor}, [&](std::vector<Tensor>*) -> absl::Status {
    WEFT_NCCL_RETURN_IF_ERROR(ncclBroadcast(tensor.raw_data(), tensor.raw_data(), tensor.nbytes(),
                                            ncclUint8, root, comm_, comm_stream_));
    return absl::OkStatus();
  });
}

std::shared_ptr<Work> NcclProcessGroup::DoAllToAllV(const OpContext& ctx, const Tensor& input,
                                                    std::vector<int64_t> input_counts,
                                                    const Tensor& output,
                                                    std::vector<int64_t> output_counts) {
  return Launch(ctx, {input, output}, [&](std::vector<Tensor>* keep) -> absl::Status {
    const char* send_base = static_cast<const char*>(input.raw_data());
    if (Overlaps(input, output)) {
      // In-place use: read from a copy made on the comm stream.
      WEFT_ASSIGN_OR_RETURN(Tensor staged, input.Clone(comm_stream_));
      keep->push_back(staged);
      send_base = static_cast<const char*>(staged.raw_data());
    }
    const size_t esize = DTypeSize(input.dtype());
    WEFT_NCCL_RETURN_IF_ERROR(ncclGroupStart());
    size_t send_off = 0, recv_off = 0;
    ncclResult_t rc = ncclSuccess;
    for (int r = 0; r < size(); ++r) {
      const size_t send_bytes = static_cast<size_t>(input_counts[r]) * esize;
      const size_t recv_bytes = static_cast<size_t>(output_counts[r]) * esize;
      if (send_bytes > 0 && (rc == ncclSuccess || rc == ncclInProgress)) {
        rc = ncclSend(send_base + send_off, send_bytes, ncclUint8, r, comm_, comm_stream_);
      }
      if (recv_bytes > 0 && (rc == ncclSuccess || rc == ncclInProgress)) {
        rc = ncclRecv(static_cast<char*>(output.raw_data()) + recv_off, recv_bytes, ncclUint8, r,
                      comm_, comm_stream_);
      }
      send_off += send_bytes;
      recv_off += recv_bytes;
    }
    const ncclResult_t end = ncclGroupEnd();
    if (rc != ncclSuccess && rc != ncclInProgress) {
      return NcclError(rc, "ncclSend/ncclRecv", __FILE__, __LINE__);
    }
    WEFT_NCCL_RETURN_IF_ERROR(end);
    return absl::OkStatus();
  });
}

std::shared_ptr<Work> NcclProcessGroup::DoBatchSendRecv(const OpContext& ctx,
                                                        std::vector<P2POp> ops) {
  std::vector<Tensor> tensors;
  for (const P2POp& op : ops) tensors.push_back(op.tensor);
  return Launch(ctx, std::move(tensors), [&](std::vector<Tensor>*) -> absl::Status {
    WEFT_NCCL_RETURN_IF_ERROR(ncclGroupStart());
    ncclResult_t rc = ncclSuccess;
    for (const P2POp& op : ops) {
      if (op.tensor.nbytes() == 0) continue;
      rc = op.type == P2POp::Type::kSend
               ? ncclSend(op.tensor.raw_data(), op.tensor.nbytes(), ncclUint8, op.peer, comm_,
                          comm_stream_)
               : ncclRecv(op.tensor.raw_data(), op.tensor.nbytes(), ncclUint8, op.peer, comm_,
                          comm_stream_);
      if (rc != ncclSuccess && rc != ncclInProgress) break;
    }
    const ncclResult_t end = ncclGroupEnd();
    if (rc != ncclSuccess && rc != ncclInProgress) {
      return NcclError(rc, "ncclSend/ncclRecv", __FILE__, __LINE__);
    }
    WEFT_NCCL_RETURN_IF_ERROR(end);
    return absl::OkStatus();
  });
}

std::shared_ptr<Work> NcclProcessGroup::DoBarrier(const OpContext& ctx) {
  return Launch(ctx, {}, [&](std::vector<Tensor>*) -> absl::Status {
    WEFT_NCCL_RETURN_IF_ERROR(ncclAllReduce(barrier_buffer_, barrier_buffer_, 1, ncclInt32,
                                            ncclSum, comm_, comm_stream_));
    return absl::OkStatus();
  });
}

}  // namespace weft::comm
