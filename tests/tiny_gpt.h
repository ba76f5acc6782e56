// Test fixtures: a tiny GPT trainer on a small generated corpus, and
// snapshots of its parameters, for integration and parity tests.
#ifndef WEFT_TESTS_TINY_GPT_H_
#define WEFT_TESTS_TINY_GPT_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <optional>

#include "absl/status/statusor.h"
#include "comm/testing/multiprocess.h"
#include "core/runtime/function_job.h"
#include "core/runtime/trainer.h"
#include "models/gpt/gpt_config.pb.h"

namespace weft::testing {

// Writes a ~60 KB English-like corpus to `dir`/corpus.txt; returns the path.
std::string WriteCorpus(const std::string& dir);

// A 2-layer, 32-wide char-level GPT job over `corpus` with dropout off,
// deterministic data order, 1 loader worker and quiet logging.
GptJob TinyGptJob(const std::string& corpus);

// The trainer options of `job` (config, data over the job's corpus, model),
// without creating the trainer: for the memory estimator's dry runs.
Trainer::Options GptTrainerOptions(const GptJob& job,
                                   std::optional<JobTopology> topology = std::nullopt);

// `job`'s data under another model (`make_model`, given the data's
// vocabulary): other model families run the GPT harnesses.
std::shared_ptr<TrainJob> WithModel(std::shared_ptr<TrainJob> job,
                                    FunctionJob::MakeModelFn make_model);

// The number of training windows (samples) the job's data holds.
absl::StatusOr<int64_t> TrainSamples(const GptJob& job);

// The topology of a rank of comm::testing::RunRanks: its rank, the world,
// and the ranks' shared store.
JobTopology RankTopology(const comm::testing::RankContext& rc);

// `topology` injects ranks and a shared store (multi-process tests).
// `customize` may set further trainer options (test hooks).
absl::StatusOr<std::unique_ptr<Trainer>> MakeGptTrainer(
    const GptJob& job, std::optional<JobTopology> topology = std::nullopt,
    const std::function<void(Trainer::Options&)>& customize = nullptr);

// Full parameter values by name on the host as f32, reassembled from the
// trainer's sharding export; for a single process (each rank of a job holds
// only its pieces: see tests/parity.h).
absl::StatusOr<std::map<std::string, std::vector<float>>> ParameterSnapshot(Trainer& trainer);

// Largest |a - b| / max(1, |b|) over all parameters.
double MaxRelativeDifference(const std::map<std::string, std::vector<float>>& a,
                             const std::map<std::string, std::vector<float>>& b);

}  // namespace weft::testing

#endif  // WEFT_TESTS_TINY_GPT_H_
