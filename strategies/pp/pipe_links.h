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
// dtype) followed by the tensor.
//
// Receivers also know what should arrive: an activation is what the model
// states its stage takes (Model::StageInput, through the pipeline), and a
// gradient has the shape and dtype of the activation this rank sent for the
// same micro-batch and boundary (remembered here). A real run checks every
// header against that and fails on a mismatch, so the statements are
// verified by every pipeline run; a dry run on the meta device, whose links
// deliver no header, allocates what is expected, and fails when nothing is.
#ifndef WEFT_STRATEGIES_PP_PIPE_LINKS_H_
#define WEFT_STRATEGIES_PP_PIPE_LINKS_H_

#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "comm/device_mesh/device_mesh.h"
#include "core/nn/run_context.h"
#include "core/nn/stage.h"

namespace weft::pp {

class PipeLinks {
 public:
  // Collective over the pp axis of `mesh` (every rank of the job calls it).
  static absl::StatusOr<std::unique_ptr<PipeLinks>> Create(comm::DeviceMesh& mesh);

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Activations to rank + 1 (mod size) / from rank - 1 (mod size);
  // `expected` is what the receiver should get, or why it cannot be known.
  absl::Status SendForward(const Tensor& t, int tag, NativeStream stream);
  absl::StatusOr<Tensor> RecvForward(int tag, const RunContext& ctx,
                                     const absl::StatusOr<StageTensor>& expected);
  // Gradients to rank - 1 / from rank + 1: the latter expects what
  // SendForward sent with the same tag.
  absl::Status SendBackward(const Tensor& t, int tag, NativeStream stream);
  absl::StatusOr<Tensor> RecvBackward(int tag, const RunContext& ctx);
  // Completes every send (their tensors may then be freed).
  absl::Status WaitSends();

  // The pp group (loss sums, gradient norms).
  comm::ProcessGroup& group() { return *pp_group_; }

 private:
  PipeLinks() = default;
  absl::Status Send(comm::ProcessGroup& g, const Tensor& t, int peer, int tag, NativeStream stream);
  absl::StatusOr<Tensor> Recv(comm::ProcessGroup& g, int peer, int tag, const RunContext& ctx,
                              const absl::StatusOr<StageTensor>& expected, const char* what);

  int rank_ = 0, size_ = 1;
  std::shared_ptr<comm::ProcessGroup> pp_group_;
  // [activations | gradients][link parity]; link l joins rank l and l + 1.
  std::shared_ptr<comm::ProcessGroup> links_[2][2];
  struct InFlight {
    std::shared_ptr<comm::Work> work;
    Tensor keep;  // the sent tensor (and header) stay alive until done
  };
  std::vector<InFlight> sends_;
  // What SendForward sent per tag, until the gradient for it arrives.
  absl::flat_hash_map<int, StageTensor> sent_forward_;
};

}  // namespace weft::pp

#endif  // WEFT_STRATEGIES_PP_PIPE_LINKS_H_
