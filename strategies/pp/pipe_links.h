// Point-to-point links between neighbouring pipeline ranks.
//
// Activations flow from pipeline rank r to r + 1 (and, with virtual stages,
// from the last rank back to the first), gradients the other way. Each
// link direction gets a communicator of its own (four groups over the pp
// axis: activations and gradients, on even and odd links), so every
// group's queue on a rank holds one ordered stream with one peer: sends
// are asynchronous and only receives block, and any schedule whose
// receives can be satisfied in order (pipeline_schedule.h checks that)
// cannot deadlock on a busy queue. Each message is a small header (shape,
// dtype) followed by the tensor, so receivers need no shape in advance.
#ifndef WEFT_STRATEGIES_PP_PIPE_LINKS_H_
#define WEFT_STRATEGIES_PP_PIPE_LINKS_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/device_mesh/device_mesh.h"
#include "core/nn/run_context.h"

namespace weft::pp {

class PipeLinks {
 public:
  // Collective over the pp axis of `mesh` (every rank of the job calls it).
  static absl::StatusOr<std::unique_ptr<PipeLinks>> Create(comm::DeviceMesh& mesh);

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Activations to rank + 1 (mod size) / from rank - 1 (mod size).
  absl::Status SendForward(const Tensor& t, int tag, NativeStream stream);
  absl::StatusOr<Tensor> RecvForward(int tag, const RunContext& ctx);
  // Gradients to rank - 1 / from rank + 1.
  absl::Status SendBackward(const Tensor& t, int tag, NativeStream stream);
  absl::StatusOr<Tensor> RecvBackward(int tag, const RunContext& ctx);
  // Completes every send (their tensors may then be freed).
  absl::Status WaitSends();

  // The pp group (loss sums, gradient norms).
  comm::ProcessGroup& group() { return *pp_group_; }

 private:
  PipeLinks() = default;
  absl::Status Send(comm::ProcessGroup& g, const Tensor& t, int peer, int tag, NativeStream stream);
  absl::StatusOr<Tensor> Recv(comm::ProcessGroup& g, int peer, int tag, const RunContext& ctx);

  int rank_ = 0, size_ = 1;
  std::shared_ptr<comm::ProcessGroup> pp_group_;
  // [activations | gradients][link parity]; link l joins rank l and l + 1.
  std::shared_ptr<comm::ProcessGroup> links_[2][2];
  struct InFlight {
    std::shared_ptr<comm::Work> work;
    Tensor keep;  // the sent tensor (and header) stay alive until done
  };
  std::vector<InFlight> sends_;
};

}  // namespace weft::pp

#endif  // WEFT_STRATEGIES_PP_PIPE_LINKS_H_
