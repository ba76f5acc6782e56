// OpObserver: lets the layer above comm (the trainer's step timer and trace
// writer) see every collective a group runs, without comm knowing about
// either. A group holds at most one observer, given in ProcessGroupOptions;
// every Work it returns reports to it when Wait is called on it.
//
// Times are microseconds on the system clock (WallMicros), so traces of
// ranks on different hosts line up as well as the hosts' clocks do.
#ifndef WEFT_COMM_PROCESS_GROUP_OP_OBSERVER_H_
#define WEFT_COMM_PROCESS_GROUP_OP_OBSERVER_H_

#include <cstdint>
#include <optional>

#include "comm/process_group/op_info.h"

namespace weft::comm {

int64_t WallMicros();

// One waited op, as the observer sees it when its Wait returns.
struct ObservedOp {
  const OpInfo* info = nullptr;
  int64_t payload_bytes = 0;  // this rank's payload (comm_stats.h)
  int64_t issued_us = 0;      // when the caller issued it
  // When the backend ran it on the host (gloo's worker thread); unknown for
  // stream-ordered backends (nccl), whose ops run on the device.
  std::optional<int64_t> started_us;
  std::optional<int64_t> finished_us;
  int64_t wait_begin_us = 0;  // the caller's Wait: on CPU the exposed part
  int64_t wait_end_us = 0;
  bool ok = true;
};

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // On the waiting thread, just before Wait blocks (or, on CUDA, before the
  // caller's stream is made to wait).
  virtual void OnWaitBegin(const OpInfo& info) = 0;
  // On the waiting thread once Wait returned.
  virtual void OnWaitEnd(const ObservedOp& op) = 0;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_PROCESS_GROUP_OP_OBSERVER_H_
