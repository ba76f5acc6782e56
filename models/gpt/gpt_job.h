// A GPT job's data and model as the trainer's callbacks, shared by the
// training binary and the memory estimator (//tools:estimate), so both
// build exactly the same model from the same config.
#ifndef WEFT_MODELS_GPT_GPT_JOB_H_
#define WEFT_MODELS_GPT_GPT_JOB_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/runtime/trainer.h"
#include "data/data.h"
#include "models/gpt/gpt_config.pb.h"

namespace weft {

// --data with each comma-separated path resolved against where `bazel run`
// was typed, or Debian's fortunes corpus when --data is empty.
absl::StatusOr<std::string> GptDataPath(const GptJob& job);

// Sets options->open_data and options->make_model for `job` over the text
// or token data at `data_path`. `resolved` (may be null) receives the job
// with the vocabulary size the data decided. `text_cache` (may be null)
// keeps tokenized text files across the jobs that share it (dry runs).
void SetGptJobCallbacks(const GptJob& job, const std::string& data_path,
                        std::shared_ptr<GptJob> resolved, Trainer::Options* options,
                        std::shared_ptr<data::TextSourceCache> text_cache = nullptr);

}  // namespace weft

#endif  // WEFT_MODELS_GPT_GPT_JOB_H_
