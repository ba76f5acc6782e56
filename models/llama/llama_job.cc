#include "models/llama/llama_job.h"

#include "core/base/status_macros.h"
#include "models/llama/llama.h"

namespace weft {

absl::StatusOr<std::unique_ptr<Model>> LlamaTrainJob::MakeModel(const DataLoaders& data) {
  LlamaConfig& config = *job_.mutable_model();
  if (config.vocab_size() == 0) config.set_vocab_size(static_cast<int32_t>(data.vocab_size));
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Llama> llama,
                        Llama::Create(config, job_.train().seq_len()));
  return std::unique_ptr<Model>(std::move(llama));
}

}  // namespace weft
