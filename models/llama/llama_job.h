// A Llama job's data and model as the trainer's job (core/runtime/train_job.h),
// shared by the training binary, the planner and the tests, so all build the
// same model from the same config.
#ifndef WEFT_MODELS_LLAMA_LLAMA_JOB_H_
#define WEFT_MODELS_LLAMA_LLAMA_JOB_H_

#include <memory>
#include <string>

#include "data/data.h"
#include "models/llama/llama_config.pb.h"
#include "models/lm/text_lm_job.h"

namespace weft {

// `job` over the text at `data_path` (see models/lm).
class LlamaTrainJob : public TextLmJob {
 public:
  LlamaTrainJob(const LlamaJob& job, std::string data_path,
                std::shared_ptr<data::TextSourceCache> text_cache = nullptr)
      : TextLmJob(job.train(), job.model().vocab_size(), std::move(data_path),
                  std::move(text_cache)),
        job_(job) {}

  absl::StatusOr<std::unique_ptr<Model>> MakeModel(const DataLoaders& data) override;
  std::string Describe() const override { return job_.DebugString(); }

  // The job, with the vocabulary size the data decided once MakeModel ran.
  const LlamaJob& job() const { return job_; }

 private:
  LlamaJob job_;
};

}  // namespace weft

#endif  // WEFT_MODELS_LLAMA_LLAMA_JOB_H_
