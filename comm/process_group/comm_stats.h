// CommStats: exact per-op communication counters of one process group.
//
// For every op this rank issues (after argument checks pass) the group adds
// one call, the op's payload bytes and its bus bytes, following the
// nccl-tests conventions so the numbers compare with published bandwidths.
// With n = group size and S = payload bytes:
//
//   op              payload S (per rank)                    bus bytes
//   all_reduce      tensor bytes                            2(n-1)/n * S
//   reduce_scatter  input bytes (= n x output)              (n-1)/n * S
//   all_gather      output bytes (sum of all ranks' parts)  S - own input bytes
//                                                           (= (n-1)/n * S when even)
//   broadcast       tensor bytes                            S
//   all_to_all      input bytes                             (n-1)/n * S
//   all_to_all_v    input bytes                             S - bytes kept for self
//   send, recv      tensor bytes                            S
//   barrier         0                                       0
//
// Bus bytes approximate what a bandwidth-optimal algorithm moves through each
// rank's link, which is why data-parallel strategies report their traffic in
// these units: DDP moves ~2 Psi per step (one all_reduce of the gradients),
// ZeRO-3/FSDP ~3 Psi (all_gather in forward and in backward, reduce_scatter
// of the gradients), where Psi is the parameter bytes. A group of one rank
// moves 0 bus bytes. bus_bytes is a double because (n-1)/n is fractional.
#ifndef WEFT_COMM_PROCESS_GROUP_COMM_STATS_H_
#define WEFT_COMM_PROCESS_GROUP_COMM_STATS_H_

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "absl/strings/string_view.h"

namespace weft::comm {

enum class OpKind : uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kAllToAll,
  kAllToAllV,
  kSend,
  kRecv,
  kBarrier,
};
inline constexpr int kNumOpKinds = 9;

absl::string_view OpKindName(OpKind kind);  // "all_reduce", "reduce_scatter", ...

struct OpCounters {
  int64_t calls = 0;
  int64_t payload_bytes = 0;
  double bus_bytes = 0;

  OpCounters& operator+=(const OpCounters& other);
};

struct CommStats {
  std::array<OpCounters, kNumOpKinds> by_op{};

  const OpCounters& operator[](OpKind kind) const { return by_op[static_cast<int>(kind)]; }
  OpCounters Total() const;
  // One line per op kind that was called: "all_reduce calls=2 payload=8.0 KiB bus=12.0 KiB".
  std::string ToString() const;
};

// Bus bytes of one op with `payload_bytes`, for a group of `group_size`,
// per the table above. For all_gather and all_to_all_v pass the bytes this
// rank keeps for itself in `self_bytes`; the other kinds ignore it.
double BusBytes(OpKind kind, int64_t payload_bytes, int group_size, int64_t self_bytes = 0);

// Thread-safe accumulator behind ProcessGroup::stats().
class CommStatsRecorder {
 public:
  void Record(OpKind kind, int64_t payload_bytes, double bus_bytes);
  CommStats Snapshot() const;
  void Reset();

 private:
  mutable std::mutex mu_;
  CommStats stats_;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_PROCESS_GROUP_COMM_STATS_H_
