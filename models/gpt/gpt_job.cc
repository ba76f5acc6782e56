#include "models/gpt/gpt_job.h"

#include "core/base/status_macros.h"
#include "models/gpt/gpt.h"

namespace weft {

absl::StatusOr<std::string> GptDataPath(const GptJob& job) { return LmDataPath(job.train()); }

absl::StatusOr<std::unique_ptr<Model>> GptTrainJob::MakeModel(const DataLoaders& data) {
  GptConfig& config = *job_.mutable_model();
  if (config.vocab_size() == 0) config.set_vocab_size(static_cast<int32_t>(data.vocab_size));
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Gpt> gpt, Gpt::Create(config, job_.train().seq_len()));
  return std::unique_ptr<Model>(std::move(gpt));
}

}  // namespace weft
