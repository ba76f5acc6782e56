// ProcessGroup: collectives over a fixed set of ranks, after PyTorch c10d.
//
// A group is created by a backend ("gloo" for CPU tensors, "nccl" for CUDA
// tensors) through CreateProcessGroup (registry.h). Every op checks its
// arguments, counts its traffic (stats()), takes the next sequence number
// (collectives and point-to-point ops are numbered separately, see OpInfo) and
// returns a Work handle; argument errors come back as a Work that already
// failed with InvalidArgument. Wait on every Work.
//
// Contract for every op:
//   - Ordering: every rank of the group must issue the same ops, with
//     matching sizes and dtypes, in the same order. Ops run in issue order
//     (point-to-point ops included), one at a time per group. A group may be
//     used from several threads, but then the threads must agree on the
//     order, or ranks will disagree on what op #k is.
//   - Tensors must be contiguous and on the group's device (CPU for gloo,
//     the group's GPU for nccl); shapes only matter through numel, except
//     for AllToAllV, which splits along dim 0.
//   - Streams: on CPU there are none; ops run on the group's worker thread.
//     On CUDA, ops run on the group's own comm stream after the work already
//     queued on options.stream (the caller's stream), and Work::Wait makes
//     options.stream wait for the op. See work.h.
//   - Buffers: inputs must not be written, and outputs not read, until Wait
//     has returned OK (CPU) or until work queued on options.stream after
//     Wait (CUDA). The group keeps the tensors' storage alive until the op is
//     done, so callers may drop their handles early.
//   - Failure: an op that fails or exceeds its timeout fails with an error
//     naming the group, sequence number, op, dtype and sizes (and the peer
//     rank when known). The group is then broken: every later op fails fast
//     with that first error. Argument errors do not break the group.
//   - Reductions are deterministic: the same inputs on the same group size
//     give bitwise-identical results run after run.
//
// Supported dtypes: f32, bf16, f16, i32, i64 everywhere; u16 (raw 16-bit
// storage) in ops that only move data. kAvg needs a floating-point dtype.
#ifndef WEFT_COMM_PROCESS_GROUP_PROCESS_GROUP_H_
#define WEFT_COMM_PROCESS_GROUP_PROCESS_GROUP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "comm/process_group/comm_stats.h"
#include "comm/process_group/op_info.h"
#include "comm/process_group/options.h"
#include "comm/process_group/work.h"
#include "core/tensor/device.h"
#include "core/tensor/tensor.h"

namespace weft::comm {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  const std::string& backend() const { return backend_; }
  // Where this group's tensors must live.
  Device device() const { return device_; }
  absl::Duration timeout() const { return timeout_; }
  // "group 'world' (gloo, rank 1 of 4)"
  const std::string& description() const { return description_; }
  // The job-wide rank of each group rank, named in errors beside the group
  // rank; set by whoever creates a subgroup (DeviceMesh) before first use.
  // Left unset where group ranks are the global ones (nothing to add).
  void set_global_ranks(std::vector<int> ranks) {
    bool identity = true;
    for (size_t i = 0; i < ranks.size(); ++i) identity &= ranks[i] == static_cast<int>(i);
    if (!identity) global_ranks_ = std::make_shared<const std::vector<int>>(std::move(ranks));
  }
  const std::vector<int>* global_ranks() const { return global_ranks_.get(); }

  // Reduces `tensor` across ranks in place; every rank gets the result.
  // Collective. Reads and overwrites `tensor`: leave it alone until Wait.
  std::shared_ptr<Work> AllReduce(const Tensor& tensor, const AllReduceOptions& options = {});

  // `input` holds size() equal blocks in rank order; rank r's `output`
  // receives the reduction of every rank's block r.
  // input.numel() == size() * output.numel(), same dtype. Collective.
  // Reads `input`, writes `output` (which may be this rank's block of `input`).
  std::shared_ptr<Work> ReduceScatter(const Tensor& input, const Tensor& output,
                                      const ReduceScatterOptions& options = {});

  // Concatenates every rank's `input` in rank order into `output`
  // (output.numel() == size() * input.numel(), same dtype). Collective.
  // `input` may be this rank's block of `output` (in-place all-gather).
  std::shared_ptr<Work> AllGather(const Tensor& input, const Tensor& output,
                                  const AllGatherOptions& options = {});

  // Rank r's `input` lands in outputs[r] on every rank. outputs.size() ==
  // size(); sizes may differ per rank (uneven all_gather) but must agree
  // across ranks, and outputs[rank()].numel() == input.numel(). Collective.
  std::shared_ptr<Work> AllGather(const Tensor& input, absl::Span<const Tensor> outputs,
                                  const AllGatherOptions& options = {});

  // Copies the root's `tensor` into every other rank's `tensor`. Collective.
  // The root only reads it; the others have it overwritten.
  std::shared_ptr<Work> Broadcast(const Tensor& tensor, const BroadcastOptions& options = {});

  // Splits `input` into size() equal blocks; block j goes to rank j, and
  // block i of `output` comes from rank i. Same numel, divisible by size().
  // Collective. `input` and `output` may be the same tensor.
  std::shared_ptr<Work> AllToAll(const Tensor& input, const Tensor& output,
                                 const AllToAllOptions& options = {});

  // AllToAll with uneven blocks along dim 0: input_splits[j] rows of `input`
  // go to rank j; output_splits[i] rows of `output` come from rank i. Splits
  // sum to the tensors' dim 0, rows have equal size in input and output, and
  // rank i's output_splits[j] must equal rank j's input_splits[i]. Empty
  // splits mean equal blocks. Collective; `input` may alias `output`.
  std::shared_ptr<Work> AllToAllV(const Tensor& input, absl::Span<const int64_t> input_splits,
                                  const Tensor& output, absl::Span<const int64_t> output_splits,
                                  const AllToAllOptions& options = {});

  // Point-to-point with group ranks. Like every op they run in issue order,
  // so a Send waits for the matching Recv: for exchanges where both sides
  // send and receive (ring passes, pipeline stages), use BatchSendRecv,
  // which runs all its legs concurrently and completes when all are done.
  // Only the two ends take part; they must issue their halves in the same
  // order relative to their other point-to-point ops. A send's tensor is only
  // read, a recv's overwritten (sizes must match the peer's).
  std::shared_ptr<Work> Send(const Tensor& tensor, int dst, const P2POptions& options = {});
  std::shared_ptr<Work> Recv(const Tensor& tensor, int src, const P2POptions& options = {});
  std::shared_ptr<Work> BatchSendRecv(absl::Span<const P2POp> ops,
                                      const P2POptions& options = {});

  // Completes on a rank only after every rank has issued it. On CUDA the
  // caller's stream waits (call Work::Synchronize to block the host).
  std::shared_ptr<Work> Barrier(const BarrierOptions& options = {});

  // Traffic counted since creation or the last ResetStats (comm_stats.h).
  CommStats stats() const { return stats_.Snapshot(); }
  void ResetStats() { stats_.Reset(); }

  // Reports every op issued from now on to `observer` (null: none).
  // CreateProcessGroup sets ProcessGroupOptions::observer here.
  void SetObserver(std::shared_ptr<OpObserver> observer) { observer_ = std::move(observer); }

  // OK while healthy; the first error once broken.
  absl::Status health() const { return health_->status(); }

 protected:
  ProcessGroup(std::string backend, std::string name, int rank, int size, Device device,
               absl::Duration timeout);

  // What the backend hooks receive besides the tensors.
  struct OpContext {
    OpInfo info;
    NativeStream stream = nullptr;
  };

  // Backend hooks, called with checked arguments on a healthy group (it may
  // break concurrently). Each must return a Work for the op and must mark the
  // group broken (MarkBroken) when the op fails.
  virtual std::shared_ptr<Work> DoAllReduce(const OpContext& ctx, const Tensor& tensor,
                                            ReduceOp op) = 0;
  virtual std::shared_ptr<Work> DoReduceScatter(const OpContext& ctx, const Tensor& input,
                                                const Tensor& output, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> DoAllGather(const OpContext& ctx, const Tensor& input,
                                            const Tensor& output) = 0;
  virtual std::shared_ptr<Work> DoAllGatherV(const OpContext& ctx, const Tensor& input,
                                             std::vector<Tensor> outputs) = 0;
  virtual std::shared_ptr<Work> DoBroadcast(const OpContext& ctx, const Tensor& tensor,
                                            int root) = 0;
  // Counts are in elements, one per rank.
  virtual std::shared_ptr<Work> DoAllToAllV(const OpContext& ctx, const Tensor& input,
                                            std::vector<int64_t> input_counts,
                                            const Tensor& output,
                                            std::vector<int64_t> output_counts) = 0;
  virtual std::shared_ptr<Work> DoBatchSendRecv(const OpContext& ctx,
                                                std::vector<P2POp> ops) = 0;
  virtual std::shared_ptr<Work> DoBarrier(const OpContext& ctx) = 0;

  void MarkBroken(const absl::Status& error) { health_->MarkBroken(error); }
  const std::shared_ptr<GroupHealth>& health_state() const { return health_; }

 private:
  absl::StatusOr<absl::Duration> ResolveTimeout(absl::Duration requested) const;
  absl::Status CheckTensor(const Tensor& t, absl::string_view what) const;
  struct Traffic {
    OpKind kind;
    int64_t payload_bytes;
    double bus_bytes;
  };
  // Fills seq, checks health, records `traffic`, then runs `issue`.
  std::shared_ptr<Work> Issue(OpInfo info, NativeStream stream, std::vector<Traffic> traffic,
                              const std::function<std::shared_ptr<Work>(const OpContext&)>& issue);
  OpInfo Unissued(absl::string_view op, std::string detail) const;

  const std::string backend_;
  const std::string name_;
  const int rank_;
  const int size_;
  const Device device_;
  const absl::Duration timeout_;
  const std::string description_;
  std::shared_ptr<const std::vector<int>> global_ranks_;  // null: group ranks are global
  std::atomic<int64_t> next_collective_seq_{0};
  std::atomic<int64_t> next_p2p_seq_{0};
  CommStatsRecorder stats_;
  std::shared_ptr<OpObserver> observer_;
  std::shared_ptr<GroupHealth> health_ = std::make_shared<GroupHealth>();
};

}  // namespace weft::comm

#endif  // WEFT_COMM_PROCESS_GROUP_PROCESS_GROUP_H_
