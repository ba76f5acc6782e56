// Ring: the point-to-point side of ring attention. cp rank r sends blocks
// to r + 1 and receives from r - 1 (mod cp) in one batched exchange, so
// both legs run at once on the group's worker while the caller computes
// on the block it already has. The ring has a communicator of its own:
// its traffic is counted apart from the gradient all-reduce (ring_bytes),
// and its queue holds nothing but ring exchanges, which every rank issues
// in the same order.
#ifndef WEFT_STRATEGIES_CP_RING_H_
#define WEFT_STRATEGIES_CP_RING_H_

#include <memory>

#include "absl/status/statusor.h"
#include "comm/process_group/process_group.h"
#include "core/tensor/tensor.h"

namespace weft::cp {

class Ring {
 public:
  // `group`: the cp ranks, group rank = position on the ring.
  explicit Ring(std::shared_ptr<comm::ProcessGroup> group) : group_(std::move(group)) {}

  int rank() const { return group_->rank(); }
  int size() const { return group_->size(); }
  // The rank whose block this rank holds after `steps` exchanges.
  int Source(int steps) const { return ((rank() - steps) % size() + size()) % size(); }

  // Sends `send` to the next rank and receives the previous rank's block of
  // the same shape into `recv`; `send` must stay alive until Wait.
  std::shared_ptr<comm::Work> Exchange(const Tensor& send, const Tensor& recv, int tag,
                                       NativeStream stream);

  // Payload bytes this rank sent and received over the ring so far.
  int64_t bytes() const;

 private:
  std::shared_ptr<comm::ProcessGroup> group_;
};

}  // namespace weft::cp

#endif  // WEFT_STRATEGIES_CP_RING_H_
