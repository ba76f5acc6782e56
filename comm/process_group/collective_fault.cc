#include "comm/process_group/collective_fault.h"

#include <atomic>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"

namespace weft::comm {
namespace {

std::mutex fault_mu;
std::optional<CollectiveFault> active_fault;
std::atomic<bool> any_fault{false};  // the issue path's one check when none is set

absl::Status BadSpec(absl::string_view spec, absl::string_view why) {
  return InvalidArgument(absl::StrCat("--debug_collective_fault=", spec, ": ", why),
                         "skip|resize,rank=R,group=NAME,seq=K",
                         "e.g. skip,rank=1,group=world,seq=5");
}

}  // namespace

absl::StatusOr<CollectiveFault> ParseCollectiveFault(absl::string_view spec) {
  std::vector<std::string> parts = absl::StrSplit(spec, ',');
  CollectiveFault f;
  if (parts[0] == "skip") {
    f.kind = CollectiveFault::Kind::kSkip;
  } else if (parts[0] == "resize") {
    f.kind = CollectiveFault::Kind::kResize;
  } else {
    return BadSpec(spec, absl::StrCat("unknown fault '", parts[0], "'"));
  }
  bool has_rank = false, has_group = false, has_seq = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(parts[i], absl::MaxSplits('=', 1));
    if (kv.first == "rank" && absl::SimpleAtoi(kv.second, &f.rank) && f.rank >= 0) {
      has_rank = true;
    } else if (kv.first == "group" && !kv.second.empty()) {
      f.group = kv.second;
      has_group = true;
    } else if (kv.first == "seq" && absl::SimpleAtoi(kv.second, &f.seq) && f.seq >= 1) {
      has_seq = true;
    } else {
      return BadSpec(spec, absl::StrCat("bad part '", parts[i], "'"));
    }
  }
  if (!has_rank || !has_group || !has_seq) return BadSpec(spec, "rank, group and seq are needed");
  return f;
}

void SetCollectiveFault(std::optional<CollectiveFault> fault) {
  std::lock_guard<std::mutex> lock(fault_mu);
  active_fault = std::move(fault);
  any_fault.store(active_fault.has_value());
}

std::optional<CollectiveFault::Kind> CollectiveFaultFor(absl::string_view group, int64_t seq) {
  if (!any_fault.load(std::memory_order_relaxed)) return std::nullopt;
  std::lock_guard<std::mutex> lock(fault_mu);
  if (!active_fault || active_fault->seq != seq) return std::nullopt;
  // The group's full name ("dp/dp_shard#0"), or its axes ("dp_shard"): a
  // mesh numbers its groups by position, which the user need not know.
  absl::string_view axes = group;
  if (size_t slash = axes.find('/'); slash != absl::string_view::npos) axes.remove_prefix(slash + 1);
  if (size_t hash = axes.rfind('#'); hash != absl::string_view::npos) axes = axes.substr(0, hash);
  if (active_fault->group != group && active_fault->group != axes) return std::nullopt;
  return active_fault->kind;
}

}  // namespace weft::comm
