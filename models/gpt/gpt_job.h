// A GPT job's data and model as the trainer's job (core/runtime/train_job.h),
// shared by the training binary, the memory estimator (//tools:estimate)
// and the tests, so all build exactly the same model from the same config.
#ifndef WEFT_MODELS_GPT_GPT_JOB_H_
#define WEFT_MODELS_GPT_GPT_JOB_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/data.h"
#include "models/gpt/gpt_config.pb.h"
#include "models/lm/text_lm_job.h"

namespace weft {

// --data with each comma-separated path resolved against where `bazel run`
// was typed, or Debian's fortunes corpus when --data is empty.
absl::StatusOr<std::string> GptDataPath(const GptJob& job);

// `job` over the text or token data at `data_path`.
class GptTrainJob : public TextLmJob {
 public:
  GptTrainJob(const GptJob& job, std::string data_path,
              std::shared_ptr<data::TextSourceCache> text_cache = nullptr)
      : TextLmJob(job.train(), job.model().vocab_size(), std::move(data_path),
                  std::move(text_cache)),
        job_(job) {}

  absl::StatusOr<std::unique_ptr<Model>> MakeModel(const DataLoaders& data) override;
  std::string Describe() const override { return job_.DebugString(); }

  // The job, with the vocabulary size the data decided once MakeModel ran.
  const GptJob& job() const { return job_; }

 private:
  GptJob job_;
};

}  // namespace weft

#endif  // WEFT_MODELS_GPT_GPT_JOB_H_
