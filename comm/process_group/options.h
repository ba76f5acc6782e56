// Options for process groups and for each collective.
//
// Every collective takes its own small options struct, written with
// designated initializers:
//   pg.AllReduce(grads, {.op = ReduceOp::kAvg, .timeout = absl::Seconds(30)});
//
// timeout: how long the op may take once it starts (after the group's
//   earlier ops finished). kUseGroupTimeout means ProcessGroupOptions::timeout.
//   When it expires the op fails with DeadlineExceeded and the group breaks.
// stream: CUDA only. The stream that produced the inputs and will consume the
//   outputs (nullptr: the legacy default stream). The op starts after the
//   work queued there so far, and Work::Wait makes it wait for the op's end.
//   Ignored by CPU backends.
#ifndef WEFT_COMM_PROCESS_GROUP_OPTIONS_H_
#define WEFT_COMM_PROCESS_GROUP_OPTIONS_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "comm/process_group/op_observer.h"
#include "comm/process_group/reduce_op.h"
#include "core/tensor/allocator.h"
#include "core/tensor/tensor.h"

namespace weft::comm {

inline constexpr absl::Duration kUseGroupTimeout = absl::ZeroDuration();

struct AllReduceOptions {
  ReduceOp op = ReduceOp::kSum;
  absl::Duration timeout = kUseGroupTimeout;
  NativeStream stream = nullptr;
};

struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::kSum;
  absl::Duration timeout = kUseGroupTimeout;
  NativeStream stream = nullptr;
};

struct AllGatherOptions {
  absl::Duration timeout = kUseGroupTimeout;
  NativeStream stream = nullptr;
};

struct BroadcastOptions {
  int root = 0;  // group rank whose tensor everyone receives
  absl::Duration timeout = kUseGroupTimeout;
  NativeStream stream = nullptr;
};

struct AllToAllOptions {
  absl::Duration timeout = kUseGroupTimeout;
  NativeStream stream = nullptr;
};

struct P2POptions {
  // Matches a Send with its Recv on gloo (both sides must agree; >= 0).
  // NCCL matches point-to-point ops by issue order only and ignores it.
  int tag = 0;
  absl::Duration timeout = kUseGroupTimeout;
  NativeStream stream = nullptr;
};

struct BarrierOptions {
  absl::Duration timeout = kUseGroupTimeout;
  NativeStream stream = nullptr;
};

// One leg of BatchSendRecv.
struct P2POp {
  enum class Type { kSend, kRecv };
  Type type = Type::kSend;
  Tensor tensor;
  int peer = 0;  // group rank
  int tag = 0;
};

// Backend-specific settings, ignored by the other backend.
struct GlooOptions {
  // Address other ranks reach this rank's gloo sockets at. When both are
  // empty, gloo uses 127.0.0.1 (single-host jobs); multi-host jobs must set
  // one (the env helper sets the hostname).
  std::string hostname;
  std::string iface;  // a network interface name, e.g. "eth0"
};

struct NcclOptions {
  // CUDA device of this rank; -1 uses the device current at creation.
  int device = -1;
  // Run collectives on a high-priority stream so they overlap compute.
  bool high_priority_stream = true;
  // When the watchdog sees a failed or timed-out collective it aborts the
  // communicator (ncclCommAbort) and marks the group broken. The host may be
  // far ahead of the failed op (ops are stream-ordered), so by default it
  // then prints the error and ends the process with exit code 1, like
  // PyTorch's async error handling. Set false to only mark the group broken.
  bool exit_on_error = true;
};

struct ProcessGroupOptions {
  // Names the group in errors and namespaces its store keys: groups sharing
  // a store need distinct names.
  std::string name = "world";
  // Default op timeout, also the bound on creating the group.
  absl::Duration timeout = absl::Seconds(300);
  // Debugging aid: before each collective, the ranks all-gather a
  // fingerprint of it (op, sequence number, dtype, sizes) and fail at once
  // with every rank's view when they disagree, instead of timing out (gloo
  // waits on per-fingerprint slots; NCCL has no such separation). Costs one
  // small all_gather per op.
  bool check_consistency = false;
  GlooOptions gloo;
  NcclOptions nccl;
  // Sees every waited op of the group (op_observer.h); may be null.
  std::shared_ptr<OpObserver> observer;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_PROCESS_GROUP_OPTIONS_H_
