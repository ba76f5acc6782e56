#include "core/runtime/job_agreement.h"

#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {
namespace {

// Scalar fields (any message) whose values may differ between ranks.
const std::set<std::string>& PerRankFields() {
  static const auto* fields = new std::set<std::string>{
      "data",        "metrics_out", "trace_dir",    "trace_steps", "report",
      "plugin",      "gloo_iface",  "device",       "cpu_threads", "num_workers",
      "prefetch_depth", "quiet",    "log_every",    "timeout_s",   "gpu_sample_s",
      "peak_tflops", "init_from"};
  return *fields;
}

bool MayDiffer(absl::string_view line) {
  line = absl::StripLeadingAsciiWhitespace(line);
  const size_t colon = line.find(": ");
  if (colon == absl::string_view::npos) return false;  // "optim {", "}"
  const std::string key(line.substr(0, colon));
  // A tokenizer file (not "char" or "bpe:N") is a path too.
  if (key == "tokenizer") return absl::StrContains(line.substr(colon), "/");
  return PerRankFields().contains(key) || absl::StartsWith(key, "sample_");
}

}  // namespace

std::string AgreementText(const std::string& job_text) {
  std::vector<absl::string_view> kept;
  for (absl::string_view line : absl::StrSplit(job_text, '\n')) {
    if (!line.empty() && !MayDiffer(line)) kept.push_back(line);
  }
  return absl::StrJoin(kept, "\n");
}

AgreementRound JobRound() {
  return {.name = "job",
          .differs = "runs another job",
          .expected = "every rank of a job with the same flags and config",
          .hint = "start every rank with the same command line (a launcher does); per-rank "
                  "paths such as --data may differ"};
}

AgreementRound DataRound() {
  return {.name = "data",
          .differs = "reads other data",
          .expected = "every rank reading the same data (same tokenizer and samples; each rank "
                      "takes its share of the one sample order)",
          .hint = "give every rank the same --data and --tokenizer contents (copies on each node "
                  "must be identical)"};
}

absl::Status CheckSameAsRankZero(comm::Store& store, const AgreementRound& round, int rank,
                                 int world_size, const std::string& text, absl::Duration timeout) {
  if (world_size <= 1) return absl::OkStatus();
  WEFT_ASSIGN_OR_RETURN(const int64_t ticket,
                        store.Add(absl::StrCat("weft_agree/", round.name, "/tickets"), 1));
  const int64_t generation = (ticket - 1) / world_size;
  const std::string key = absl::StrCat("weft_agree/", round.name, "/", generation, "/rank0");
  if (rank == 0) return store.Set(key, text);
  absl::StatusOr<std::string> theirs = store.Get(key, timeout);
  WEFT_RETURN_IF_ERROR(Annotate(theirs.status(),
                                absl::StrCat("waiting for rank 0's ", round.name, " to compare")));
  if (*theirs == text) return absl::OkStatus();
  const std::vector<std::string> mine_lines = absl::StrSplit(text, '\n');
  const std::vector<std::string> their_lines = absl::StrSplit(*theirs, '\n');
  size_t i = 0;
  while (i < mine_lines.size() && i < their_lines.size() && mine_lines[i] == their_lines[i]) ++i;
  auto at = [](const std::vector<std::string>& lines, size_t i) {
    return i < lines.size() ? std::string(absl::StripAsciiWhitespace(lines[i]))
                            : std::string("(nothing)");
  };
  return FailedPrecondition(absl::StrCat("rank ", rank, " ", round.differs, " than rank 0: '",
                                         at(mine_lines, i), "' here, '", at(their_lines, i),
                                         "' on rank 0"),
                            round.expected, round.hint);
}

}  // namespace weft
