// A Llama job's data and model as the trainer's callbacks, shared by the
// training binary and the tests, so both build the same model from the
// same config.
#ifndef WEFT_MODELS_LLAMA_LLAMA_JOB_H_
#define WEFT_MODELS_LLAMA_LLAMA_JOB_H_

#include <memory>
#include <string>

#include "core/runtime/trainer.h"
#include "data/data.h"
#include "models/llama/llama_config.pb.h"

namespace weft {

// Sets options->open_data (the text at `data_path`, see models/lm) and
// options->make_model. `resolved` (may be null) receives the job with the
// vocabulary size the data decided.
void SetLlamaJobCallbacks(const LlamaJob& job, const std::string& data_path,
                          std::shared_ptr<LlamaJob> resolved, Trainer::Options* options,
                          std::shared_ptr<data::TextSourceCache> text_cache = nullptr);

}  // namespace weft

#endif  // WEFT_MODELS_LLAMA_LLAMA_JOB_H_
