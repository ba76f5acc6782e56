// TpComm: what the tensor-parallel layers share: the tp group, the stream
// collectives are ordered on, and whether activations outside the parallel
// regions are sequence shards (Megatron-SP).
#ifndef WEFT_STRATEGIES_TP_TP_COMM_H_
#define WEFT_STRATEGIES_TP_TP_COMM_H_

#include <memory>

#include "comm/process_group/process_group.h"

namespace weft::tp {

struct TpComm {
  std::shared_ptr<comm::ProcessGroup> group;
  NativeStream stream = nullptr;
  bool sequence_parallel = false;

  int rank() const { return group->rank(); }
  int size() const { return group->size(); }
};

}  // namespace weft::tp

#endif  // WEFT_STRATEGIES_TP_TP_COMM_H_
