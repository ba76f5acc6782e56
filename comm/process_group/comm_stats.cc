#include "comm/process_group/comm_stats.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weft::comm {
namespace {

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  return absl::StrFormat(u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
}

}  // namespace

absl::string_view OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce:
      return "all_reduce";
    case OpKind::kReduceScatter:
      return "reduce_scatter";
    case OpKind::kAllGather:
      return "all_gather";
    case OpKind::kBroadcast:
      return "broadcast";
    case OpKind::kAllToAll:
      return "all_to_all";
    case OpKind::kAllToAllV:
      return "all_to_all_v";
    case OpKind::kSend:
      return "send";
    case OpKind::kRecv:
      return "recv";
    case OpKind::kBarrier:
      return "barrier";
  }
  return "unknown";
}

OpCounters& OpCounters::operator+=(const OpCounters& other) {
  calls += other.calls;
  payload_bytes += other.payload_bytes;
  bus_bytes += other.bus_bytes;
  return *this;
}

OpCounters CommStats::Total() const {
  OpCounters total;
  for (const OpCounters& c : by_op) total += c;
  return total;
}

std::string CommStats::ToString() const {
  std::string out;
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpCounters& c = by_op[k];
    if (c.calls == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : "\n", OpKindName(static_cast<OpKind>(k)),
                    " calls=", c.calls, " payload=", HumanBytes(c.payload_bytes),
                    " bus=", HumanBytes(c.bus_bytes));
  }
  return out.empty() ? "no communication" : out;
}

double BusBytes(OpKind kind, int64_t payload_bytes, int group_size, int64_t self_bytes) {
  const double s = static_cast<double>(payload_bytes);
  const double n = group_size;
  if (group_size <= 1) return 0;
  switch (kind) {
    case OpKind::kAllReduce:
      return 2.0 * (n - 1) / n * s;
    case OpKind::kReduceScatter:
    case OpKind::kAllToAll:
      return (n - 1) / n * s;
    case OpKind::kAllGather:
    case OpKind::kAllToAllV:
      return s - static_cast<double>(self_bytes);
    case OpKind::kBroadcast:
    case OpKind::kSend:
    case OpKind::kRecv:
      return s;
    case OpKind::kBarrier:
      return 0;
  }
  return 0;
}

void CommStatsRecorder::Record(OpKind kind, int64_t payload_bytes, double bus_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  OpCounters& c = stats_.by_op[static_cast<int>(kind)];
  c.calls += 1;
  c.payload_bytes += payload_bytes;
  c.bus_bytes += bus_bytes;
}

CommStats CommStatsRecorder::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CommStatsRecorder::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = CommStats();
}

}  // namespace weft::comm
