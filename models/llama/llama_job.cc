#include "models/llama/llama_job.h"

#include "core/base/status_macros.h"
#include "models/llama/llama.h"
#include "models/lm/text_lm_job.h"

namespace weft {

void SetLlamaJobCallbacks(const LlamaJob& job, const std::string& data_path,
                          std::shared_ptr<LlamaJob> resolved, Trainer::Options* options,
                          std::shared_ptr<data::TextSourceCache> text_cache) {
  SetTextDataCallback(job.train(), job.model().vocab_size(), data_path, options,
                      std::move(text_cache));
  options->make_model = [job, resolved](
                            const DataLoaders& d) -> absl::StatusOr<std::unique_ptr<Model>> {
    LlamaConfig config = job.model();
    if (config.vocab_size() == 0) config.set_vocab_size(static_cast<int32_t>(d.vocab_size));
    if (resolved != nullptr) *resolved->mutable_model() = config;
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Llama> llama,
                          Llama::Create(config, job.train().seq_len()));
    return std::unique_ptr<Model>(std::move(llama));
  };
}

}  // namespace weft
