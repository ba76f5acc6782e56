// GlooProcessGroup: the CPU backend, gloo's collectives over TCP.
//
// Each group owns a gloo TCP device (loopback, or the hostname/interface in
// GlooOptions) connected to every peer, and one worker thread that runs the
// group's ops in issue order; Work::Wait blocks the caller until its op is
// done. Ops carry their sequence number as the gloo tag, so ranks that
// disagree on the op order time out instead of mixing data.
//
// Reductions are deterministic and computed in rank order:
//   ReduceScatter = gloo alltoall (each rank receives its block from every
//                   rank) + a local rank-order reduction: (n-1)/n traffic.
//   AllReduce     = the same reduce-scatter over near-equal chunks
//                   (alltoallv) followed by allgatherv: 2(n-1)/n traffic, and
//                   bitwise equal to ReduceScatter + AllGather of the same data.
// bf16/f16 accumulate in float and round once (reduce_kernels.h).
//
// Failures: gloo timeouts become DeadlineExceeded, a dead peer's closed
// connection becomes Unavailable naming that peer's rank; the group then
// breaks (process_group.h). Groups of one rank run every op locally.
#ifndef WEFT_COMM_GLOO_GLOO_PROCESS_GROUP_H_
#define WEFT_COMM_GLOO_GLOO_PROCESS_GROUP_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/gloo/peer_directory.h"
#include "comm/gloo/serial_executor.h"
#include "comm/process_group/process_group.h"
#include "comm/store/store.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace weft::comm {

class GlooProcessGroup final : public ProcessGroup {
 public:
  // Connects to every peer through `store` (already scoped to this group).
  static absl::StatusOr<std::shared_ptr<ProcessGroup>> Create(std::shared_ptr<Store> store,
                                                              int rank, int size,
                                                              const ProcessGroupOptions& options);
  // Runs the ops already issued (each bounded by its timeout), then closes.
  ~GlooProcessGroup() override;

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
  GlooProcessGroup(int rank, int size, const ProcessGroupOptions& options);

  // Queues `body` on the worker; its status (or the exception it throws,
  // translated) completes the returned Work and breaks the group on error.
  std::shared_ptr<Work> Enqueue(const OpContext& ctx,
                                std::function<absl::Status(const OpInfo&)> body);
  absl::Status TranslateException(const OpInfo& info, const std::exception& e) const;
  // ProcessGroupOptions::check_consistency: all-gathers the op's fingerprint.
  absl::Status CheckConsistency(const OpInfo& info);
  // Rank-order reduce-scatter of `input` (counts[r] elements for rank r)
  // into `out` (counts[rank()] elements).
  void ReduceScatterInto(const OpInfo& info, const Tensor& input,
                         const std::vector<int64_t>& counts, ReduceOp op, void* out);

  // Point-to-point legs of a failed batch, kept alive (with their tensors)
  // until the context is gone because gloo may still reference them.
  // Declared before context_ so it is destroyed after it.
  struct Abandoned {
    std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>> buffers;
    std::vector<P2POp> ops;
  };
  std::vector<Abandoned> abandoned_;  // touched by the worker thread only
  std::shared_ptr<::gloo::Context> context_;  // null for a group of one
  // gloo names peers by socket address in its errors; this maps them back.
  gloo_internal::PeerDirectory peers_;
  // What each rank advertised ("10.0.0.2"), by rank, for timeout messages.
  std::vector<std::string> advertised_;
  bool check_consistency_ = false;
  std::unique_ptr<gloo_internal::SerialExecutor> executor_;  // last: joins first
};

}  // namespace weft::comm

#endif  // WEFT_COMM_GLOO_GLOO_PROCESS_GROUP_H_
