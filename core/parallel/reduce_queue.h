// ReduceQueue: the window of asynchronous gradient reduce-scatters that zero
// and fsdp keep in flight during backward. Launch starts one group's reduce
// and, beyond `max_in_flight`, finishes the oldest, so at most that many
// full-size gradient buffers are alive at once; Drain finishes the rest in
// launch order.
#ifndef WEFT_CORE_PARALLEL_REDUCE_QUEUE_H_
#define WEFT_CORE_PARALLEL_REDUCE_QUEUE_H_

#include <cstddef>
#include <deque>

#include "absl/status/status.h"
#include "core/base/status_macros.h"
#include "core/parallel/sharded_group.h"

namespace weft {

class ReduceQueue {
 public:
  explicit ReduceQueue(size_t max_in_flight) : max_in_flight_(max_in_flight) {}

  absl::Status Launch(ShardedGroup& group) {
    WEFT_RETURN_IF_ERROR(group.ReduceGrads(/*async=*/true));
    in_flight_.push_back(&group);
    return FinishBeyond(max_in_flight_);
  }
  absl::Status Drain() { return FinishBeyond(0); }
  size_t size() const { return in_flight_.size(); }

 private:
  absl::Status FinishBeyond(size_t keep) {
    while (in_flight_.size() > keep) {
      ShardedGroup* oldest = in_flight_.front();
      in_flight_.pop_front();
      WEFT_RETURN_IF_ERROR(oldest->FinishReduce());
    }
    return absl::OkStatus();
  }

  size_t max_in_flight_;
  std::deque<ShardedGroup*> in_flight_;
};

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_REDUCE_QUEUE_H_
