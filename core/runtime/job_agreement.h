// Every rank of a job must run the same job: a rank started by hand with
// another --lr or --seed would otherwise train silently out of step (ddp
// averages gradients of different models). At startup each rank compares
// its job (protobuf text, less what may differ per rank) with rank 0's
// through the rendezvous store.
#ifndef WEFT_CORE_RUNTIME_JOB_AGREEMENT_H_
#define WEFT_CORE_RUNTIME_JOB_AGREEMENT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/store/store.h"
#include "data/dataset.h"

namespace weft {

// `job_text` without the lines that may differ between ranks: paths each
// rank reads or writes (data, metrics, traces, plugins), the device
// index, and knobs that leave the math alone (threads, loader
// workers, logging, timeouts, rank 0's samples).
std::string AgreementText(const std::string& job_text);

// What ranks must agree on about their data: the tokenizer, the vocabulary
// size, and each split's sample count and the bytes of its first, middle
// and last samples (an edit elsewhere that keeps those passes).
absl::StatusOr<std::string> DataAgreementText(const std::string& tokenizer, int64_t vocab_size,
                                              const data::Dataset& train,
                                              const data::Dataset* val);

// What one comparison is about, for its keys and its error.
struct AgreementRound {
  std::string name;      // "job": keys weft_agree/job/...
  std::string differs;   // "runs another job": "rank 1 <differs> than rank 0: ..."
  std::string expected;  // the error's "expected ..."
  std::string hint;
};

// The job (AgreementText of it), before any mesh group.
AgreementRound JobRound();
// What the data gives (tokenizer, sample counts), once the loaders open.
AgreementRound DataRound();

// Rank 0 posts `text`; every other rank reads it (up to `timeout`), fails
// naming the first line that differs, and reports its outcome to rank 0.
// Rank 0 waits for every report and posts the first disagreement (the
// lowest rank's), so it and the ranks that agreed fail with that message
// at once rather than at a later collective's timeout. A launched job has a store of
// its own; jobs that share one in turn (tests) get keys of a new
// generation per call of a round and world size, which holds while each
// earlier job of that world size reached the check on every rank.
absl::Status CheckSameAsRankZero(comm::Store& store, const AgreementRound& round, int rank,
                                 int world_size, const std::string& text, absl::Duration timeout);

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_JOB_AGREEMENT_H_
