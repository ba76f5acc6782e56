// What every language-model job shares: where its text comes from (--data,
// or Debian's fortunes corpus) and the trainer callback that opens it,
// tokenized, for the job's sequence length. GPT and Llama jobs add their
// model on top (models/gpt/gpt_job.h, models/llama/llama_job.h).
#ifndef WEFT_MODELS_LM_TEXT_LM_JOB_H_
#define WEFT_MODELS_LM_TEXT_LM_JOB_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/runtime/train_config.pb.h"
#include "core/runtime/trainer.h"
#include "data/data.h"

namespace weft {

// --data with each comma-separated path resolved against where `bazel run`
// was typed, or Debian's fortunes corpus when --data is empty.
absl::StatusOr<std::string> LmDataPath(const TrainConfig& train);

// Sets options->open_data: the text or token data at `data_path`, with a
// vocabulary of `vocab_size` (0: the tokenizer's). `text_cache` (may be
// null) keeps tokenized text files across the jobs that share it.
void SetTextDataCallback(const TrainConfig& train, int32_t vocab_size,
                         const std::string& data_path, Trainer::Options* options,
                         std::shared_ptr<data::TextSourceCache> text_cache = nullptr);

}  // namespace weft

#endif  // WEFT_MODELS_LM_TEXT_LM_JOB_H_
