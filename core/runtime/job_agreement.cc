#include "core/runtime/job_agreement.h"

#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/fnv1a.h"
#include "core/base/status_macros.h"

namespace weft {
namespace {

// Scalar fields (any message) whose values may differ between ranks.
const std::set<std::string>& PerRankFields() {
  static const auto* fields = new std::set<std::string>{
      "data",        "metrics_out", "trace_dir",    "trace_steps", "report",
      "plugin",      "gloo_iface",  "cpu_threads", "num_workers",
      "prefetch_depth", "quiet",    "log_every",    "timeout_s",   "gpu_sample_s",
      "peak_tflops"};
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
  std::vector<std::string> kept;
  for (absl::string_view line : absl::StrSplit(job_text, '\n')) {
    if (line.empty() || MayDiffer(line)) continue;
    std::string l(line);
    // device: "cuda:1" compares as "cuda" (each rank its own GPU).
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(l), "device: \"")) {
      const size_t index = l.find(':', l.find('"'));
      if (index != std::string::npos) l = l.substr(0, index) + "\"";
    }
    kept.push_back(std::move(l));
  }
  return absl::StrJoin(kept, "\n");
}

absl::StatusOr<std::string> DataAgreementText(const std::string& tokenizer, int64_t vocab_size,
                                              const data::Dataset& train,
                                              const data::Dataset* val) {
  auto digest = [](const data::Dataset& d) -> absl::StatusOr<std::string> {
    std::vector<std::vector<uint8_t>> bufs;
    std::vector<void*> dst;
    for (const data::FieldSpec& f : d.fields()) bufs.emplace_back(f.SampleBytes());
    for (auto& b : bufs) dst.push_back(b.data());
    uint64_t h = kFnv1aBasis;
    const int64_t n = d.num_samples();
    for (const int64_t index : {int64_t{0}, n / 2, n - 1}) {
      if (index < 0 || index >= n) continue;
      WEFT_RETURN_IF_ERROR(d.Fill(index, dst));
      for (const auto& b : bufs) h = Fnv1a(b.data(), b.size(), h);
    }
    return absl::StrFormat("%d samples, first/middle/last %016x", n, h);
  };
  WEFT_ASSIGN_OR_RETURN(const std::string train_text, digest(train));
  std::string val_text = "none";
  if (val != nullptr) {
    WEFT_ASSIGN_OR_RETURN(val_text, digest(*val));
  }
  return absl::StrCat(
      "tokenizer: ",
      tokenizer.empty() ? "none" : absl::StrFormat("%016x", Fnv1a(tokenizer.data(), tokenizer.size())),
      "\nvocab_size: ", vocab_size, "\ntraining data: ", train_text,
      "\nvalidation data: ", val_text);
}

namespace {

// This rank's `text` against rank 0's: the first line that differs.
absl::Status Compare(const AgreementRound& round, int rank, const std::string& text,
                     const std::string& theirs) {
  if (theirs == text) return absl::OkStatus();
  const std::vector<std::string> mine_lines = absl::StrSplit(text, '\n');
  const std::vector<std::string> their_lines = absl::StrSplit(theirs, '\n');
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

}  // namespace

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
  const std::string prefix = absl::StrCat("weft_agree/", round.name, "/w", world_size, "/");
  WEFT_ASSIGN_OR_RETURN(const int64_t ticket, store.Add(prefix + "tickets", 1));
  const std::string base = absl::StrCat(prefix, (ticket - 1) / world_size, "/");
  if (rank == 0) {
    WEFT_RETURN_IF_ERROR(store.Set(base + "rank0", text));
    // Every rank reports its comparison, so rank 0 names one that disagreed
    // instead of waiting at its first collective for a rank that has left;
    // the others learn the outcome and stop too.
    std::string outcome;
    for (int r = 1; r < world_size; ++r) {
      absl::StatusOr<std::string> verdict = store.Get(absl::StrCat(base, "verdict/", r), timeout);
      WEFT_RETURN_IF_ERROR(Annotate(verdict.status(), absl::StrCat("waiting for rank ", r, "'s ",
                                                                   round.name, " comparison")));
      if (outcome.empty()) outcome = *verdict;
    }
    WEFT_RETURN_IF_ERROR(store.Set(base + "outcome", outcome));
    return outcome.empty() ? absl::OkStatus() : absl::FailedPreconditionError(outcome);
  }
  absl::StatusOr<std::string> theirs = store.Get(base + "rank0", timeout);
  WEFT_RETURN_IF_ERROR(Annotate(theirs.status(),
                                absl::StrCat("waiting for rank 0's ", round.name, " to compare")));
  const absl::Status mine = Compare(round, rank, text, *theirs);
  WEFT_RETURN_IF_ERROR(
      store.Set(absl::StrCat(base, "verdict/", rank), mine.ok() ? "" : std::string(mine.message())));
  if (!mine.ok()) return mine;
  absl::StatusOr<std::string> outcome = store.Get(base + "outcome", timeout);
  WEFT_RETURN_IF_ERROR(Annotate(outcome.status(), absl::StrCat("waiting for the ", round.name,
                                                                " comparisons of every rank")));
  return outcome->empty() ? absl::OkStatus() : absl::FailedPreconditionError(*outcome);
}

}  // namespace weft
