// What every language-model job shares: where its text comes from (--data,
// or Debian's fortunes corpus) and the trainer job that opens it,
// tokenized, for the job's sequence length. GPT and Llama jobs add their
// model on top (models/gpt/gpt_job.h, models/llama/llama_job.h).
#ifndef WEFT_MODELS_LM_TEXT_LM_JOB_H_
#define WEFT_MODELS_LM_TEXT_LM_JOB_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/runtime/train_config.pb.h"
#include "core/runtime/train_job.h"
#include "data/data.h"

namespace weft {

// --data with each comma-separated path resolved against where `bazel run`
// was typed, or Debian's fortunes corpus when --data is empty.
absl::StatusOr<std::string> LmDataPath(const TrainConfig& train);

// The trainer's job for a language model over text or token data
// (train_job.h): OpenData reads the data at `data_path` with a vocabulary
// of `vocab_size` (0: the tokenizer's); a model family adds MakeModel.
// `text_cache` (may be null) keeps tokenized text files across the jobs
// that share it (the planner's dry runs).
class TextLmJob : public TrainJob {
 public:
  TextLmJob(TrainConfig train, int32_t vocab_size, std::string data_path,
            std::shared_ptr<data::TextSourceCache> text_cache = nullptr)
      : train_(std::move(train)),
        vocab_size_(vocab_size),
        data_path_(std::move(data_path)),
        text_cache_(std::move(text_cache)) {}

  absl::StatusOr<DataLoaders> OpenData(const data::DataLoader::Options& base) override;

 protected:
  const TrainConfig& train() const { return train_; }

 private:
  const TrainConfig train_;
  const int32_t vocab_size_;
  const std::string data_path_;
  const std::shared_ptr<data::TextSourceCache> text_cache_;
};

}  // namespace weft

#endif  // WEFT_MODELS_LM_TEXT_LM_JOB_H_
