#include "comm/process_group/flight_recorder.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "comm/process_group/op_info.h"
#include "comm/process_group/op_observer.h"
#include "core/base/errors.h"
#include "core/base/json.h"

namespace weft::comm {

const char* FlightStateName(FlightState s) {
  switch (s) {
    case FlightState::kIssued: return "issued";
    case FlightState::kStarted: return "started";
    case FlightState::kCompleted: return "completed";
    case FlightState::kFailed: return "failed";
    case FlightState::kWaited: return "waited";
  }
  return "?";
}

void FlightEntry::MarkStarted() {
  started_us.store(WallMicros());
  int issued = static_cast<int>(FlightState::kIssued);
  state.compare_exchange_strong(issued, static_cast<int>(FlightState::kStarted));
}

void FlightEntry::MarkEnded(bool ok) {
  int s = state.load();
  const int to = static_cast<int>(ok ? FlightState::kCompleted : FlightState::kFailed);
  while (s == static_cast<int>(FlightState::kIssued) || s == static_cast<int>(FlightState::kStarted)) {
    if (state.compare_exchange_weak(s, to)) {
      ended_us.store(WallMicros());
      return;
    }
  }
}

void FlightEntry::MarkWaited(bool ok) {
  int s = state.load();
  const int to = static_cast<int>(ok ? FlightState::kWaited : FlightState::kFailed);
  while (s == static_cast<int>(FlightState::kIssued) || s == static_cast<int>(FlightState::kStarted)) {
    if (state.compare_exchange_weak(s, to)) {
      ended_us.store(WallMicros());
      return;
    }
  }
}

FlightRecorder& FlightRecorder::Global() {
  static FlightRecorder* recorder = new FlightRecorder();  // never destroyed: ops outlive statics
  return *recorder;
}

void FlightRecorder::SetCapacity(int entries) {
  std::lock_guard<std::mutex> lock(mu_);
  capacity_ = entries < 0 ? 0 : entries;
  ring_.clear();
}

int FlightRecorder::capacity() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capacity_;
}

void FlightRecorder::SetIdentity(int rank, int world_size) {
  std::lock_guard<std::mutex> lock(mu_);
  rank_ = rank;
  world_size_ = world_size;
}

std::shared_ptr<FlightEntry> FlightRecorder::Record(const OpInfo& info, absl::string_view group,
                                                    int group_rank, int group_size,
                                                    const std::vector<int>* ranks) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (capacity_ == 0) return nullptr;
  }
  auto e = std::make_shared<FlightEntry>();
  e->group = std::string(group);
  if (ranks != nullptr) {
    e->ranks = *ranks;
  } else {
    for (int r = 0; r < group_size; ++r) e->ranks.push_back(r);
  }
  e->group_rank = group_rank;
  e->seq = info.seq;
  e->point_to_point = info.point_to_point;
  e->peer = info.peer;
  e->op = info.op;
  e->detail = info.detail;
  e->fingerprint = info.fingerprint;
  e->issued_us = WallMicros();
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity_ == 0) return nullptr;
  ring_.push_back(e);
  while (static_cast<int>(ring_.size()) > capacity_) ring_.pop_front();
  return e;
}

std::vector<std::shared_ptr<const FlightEntry>> FlightRecorder::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {ring_.begin(), ring_.end()};
}

std::string FlightRecorder::ToJson(absl::string_view reason) const {
  int rank, world;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rank = rank_;
    world = world_size_;
  }
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string out = absl::StrCat("{\"weft_flight_recorder\": 1, \"rank\": ", rank,
                                 ", \"world_size\": ", world, ", \"pid\": ", getpid(),
                                 ", \"host\": \"", JsonEscape(host), "\", \"reason\": \"",
                                 JsonEscape(reason), "\", \"dumped_us\": ", WallMicros(),
                                 ", \"entries\": [");
  bool first = true;
  for (const auto& e : Snapshot()) {
    std::string ranks;
    for (size_t i = 0; i < e->ranks.size(); ++i) absl::StrAppend(&ranks, i ? ", " : "", e->ranks[i]);
    absl::StrAppend(
        &out, first ? "\n  " : ",\n  ", "{\"group\": \"", JsonEscape(e->group), "\", \"ranks\": [",
        ranks, "], \"group_rank\": ", e->group_rank, ", \"seq\": ", e->seq,
        ", \"point_to_point\": ", e->point_to_point ? "true" : "false", ", \"peer\": ", e->peer,
        ", \"op\": \"", JsonEscape(e->op), "\", \"detail\": \"", JsonEscape(e->detail),
        "\", \"fingerprint\": \"", JsonEscape(e->fingerprint), "\", \"state\": \"",
        FlightStateName(static_cast<FlightState>(e->state.load())),
        "\", \"issued_us\": ", e->issued_us, ", \"started_us\": ", e->started_us.load(),
        ", \"ended_us\": ", e->ended_us.load(), "}");
    first = false;
  }
  absl::StrAppend(&out, "\n]}\n");
  return out;
}

std::string FlightDumpPath(const std::string& dir, int rank) {
  return absl::StrCat(dir, "/rank_", rank, ".json");
}

absl::Status FlightRecorder::DumpTo(const std::string& dir, absl::string_view reason,
                                    std::string* path) const {
  int rank;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rank = rank_;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return FailedPrecondition(absl::StrCat("cannot create the flight recorder directory ", dir,
                                           ": ", ec.message()),
                              "a writable directory", "pass --flight_dir=DIR");
  }
  const std::string final_path = FlightDumpPath(dir, rank);
  static std::atomic<int> dumps{0};
  const std::string tmp = absl::StrCat(final_path, ".tmp.", getpid(), ".", dumps.fetch_add(1));
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << ToJson(reason);
    f.close();
    if (!f) {
      std::remove(tmp.c_str());
      return FailedPrecondition(absl::StrCat("cannot write ", tmp), "a writable directory",
                                "pass --flight_dir=DIR");
    }
  }
  if (std::rename(tmp.c_str(), final_path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return FailedPrecondition(absl::StrCat("cannot rename ", tmp, " to ", final_path),
                              "a writable directory");
  }
  if (path != nullptr) *path = final_path;
  return absl::OkStatus();
}

}  // namespace weft::comm
