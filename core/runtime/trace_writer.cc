#include "core/runtime/trace_writer.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"
#include "core/base/json.h"

namespace weft {
namespace {

constexpr char kHeader[] = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
constexpr char kFooter[] = "]}";

std::string Metadata(int pid, int tid, const char* what, const std::string& name) {
  return absl::StrCat("{\"ph\":\"M\",\"pid\":", pid, ",\"tid\":", tid, ",\"name\":\"", what,
                      "\",\"args\":{\"name\":\"", JsonEscape(name), "\"}}");
}

absl::Status WriteAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    return FailedPrecondition(absl::StrCat("cannot write trace file '", tmp, "'"),
                              "a writable --trace_dir", "create the directory first");
  }
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    return FailedPrecondition(absl::StrCat("writing trace file '", path, "' failed"),
                              "space and permission in --trace_dir");
  }
  return absl::OkStatus();
}

std::string Document(const std::vector<std::string>& events) {
  return absl::StrCat(kHeader, "\n", absl::StrJoin(events, ",\n"), "\n", kFooter, "\n");
}

}  // namespace

void TraceWriter::NameTrack(int tid, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  track_names_[tid] = name;
}

void TraceWriter::Add(int tid, const std::string& name, const std::string& category, int64_t ts_us,
                      int64_t dur_us, const std::string& args) {
  std::string e = absl::StrCat("{\"ph\":\"X\",\"pid\":", rank_, ",\"tid\":", tid, ",\"name\":\"",
                               JsonEscape(name), "\",\"cat\":\"", category, "\",\"ts\":", ts_us,
                               ",\"dur\":", std::max<int64_t>(0, dur_us));
  if (!args.empty()) absl::StrAppend(&e, ",\"args\":{", args, "}");
  e += "}";
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
}

size_t TraceWriter::num_events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

std::string TraceWriter::ToJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> all;
  all.push_back(Metadata(rank_, 0, "process_name", absl::StrCat("rank ", rank_)));
  all.push_back(absl::StrCat(
      "{\"ph\":\"M\",\"pid\":", rank_,
      ",\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":", rank_, "}}"));
  for (const auto& [tid, name] : track_names_) {
    all.push_back(Metadata(rank_, tid, "thread_name", name));
  }
  all.insert(all.end(), events_.begin(), events_.end());
  return Document(all);
}

absl::Status TraceWriter::Write(const std::string& path) const {
  return WriteAtomically(path, ToJson());
}

std::string RankTracePath(const std::string& dir, int rank) {
  return absl::StrCat(dir, "/trace_rank", rank, ".json");
}

std::string MergedTracePath(const std::string& dir) { return dir + "/trace_merged.json"; }

absl::Status MergeTraceFiles(const std::vector<std::string>& inputs, const std::string& output) {
  std::vector<std::string> events;
  for (const std::string& path : inputs) {
    std::ifstream in(path);
    if (!in) {
      return NotFound(absl::StrCat("cannot open trace '", path, "'"), "a trace written by weft");
    }
    std::string line;
    while (std::getline(in, line)) {
      if (!absl::StartsWith(line, "{\"ph\"")) continue;  // header and footer
      if (absl::EndsWith(line, ",")) line.pop_back();
      events.push_back(line);
    }
  }
  return WriteAtomically(output, Document(events));
}

}  // namespace weft
