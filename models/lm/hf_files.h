// The files of a Hugging Face checkpoint directory, as transformers'
// save_pretrained writes them: config.json, and model.safetensors or the
// shards model.safetensors.index.json lists. Shared by the model families'
// readers (models/gpt/hf_gpt2.h, models/llama/hf_checkpoint.h), which map
// the names and shapes.
#ifndef WEFT_MODELS_LM_HF_FILES_H_
#define WEFT_MODELS_LM_HF_FILES_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/host_tensor.h"
#include "core/base/errors.h"
#include "core/base/json.h"

namespace weft {

// True when `path` is a directory holding a config.json.
bool IsHfCheckpoint(const std::string& path);

// DIR/config.json parsed, and its path (for messages).
struct HfConfig {
  JsonValue json;
  std::string path;
  std::string architecture;  // architectures[0], or "" when absent
};
absl::StatusOr<HfConfig> ReadHfConfig(const std::string& dir);

// A number field; `fallback` when absent or null, else an error naming it.
absl::StatusOr<double> HfNumber(const HfConfig& c, const char* key,
                                std::optional<double> fallback = std::nullopt);
// A field that is present and not null, or nullptr.
const JsonValue* HfField(const HfConfig& c, const char* key);

// DIR/tokenizer.json in weft's serialized form, "" when there is none; an
// error when it is there but not of a scheme weft reads (the caller may
// then take --tokenizer instead).
absl::StatusOr<std::string> ReadHfTokenizer(const std::string& dir);

// Every tensor of the checkpoint's safetensors file(s), by its HF name.
absl::StatusOr<std::map<std::string, ckpt::HostTensor>> ReadHfTensors(const std::string& dir);

// A model in Hugging Face's form: its config.json and its tensors by HF name.
struct HfExport {
  std::string config_json;
  std::map<std::string, ckpt::HostTensor> tensors;
};

struct HfWriteOptions {
  std::string dtype = "F32";  // "F32", "BF16" or "F16"
  // Tensors per file up to this many bytes: model.safetensors when all fit
  // in one, else model-0000N-of-0000M.safetensors and their index.
  int64_t shard_bytes = int64_t{5} << 30;
  // Other files of the directory (tokenizer.json), by name.
  std::map<std::string, std::string> files;
};

// Writes DIR (created when missing) as save_pretrained would: config.json,
// the safetensors file(s) with {"format": "pt"} metadata, and
// `options.files`; each file through a temporary and a rename.
absl::Status WriteHfDirectory(const std::string& dir, const std::string& config_json,
                              const std::map<std::string, ckpt::HostTensor>& tensors,
                              const HfWriteOptions& options = {});

// config.json's "torch_dtype" for a safetensors dtype ("float32", ...).
std::string HfTorchDtype(const std::string& dtype);

// A field the job set itself (`set`) must agree with config.json's `key`.
template <typename T>
absl::Status HfAgree(bool set, T mine, T theirs, const char* flag, const char* key,
                     const HfConfig& c) {
  if (!set || mine == theirs) return absl::OkStatus();
  return InvalidArgument(
      absl::StrCat("--", flag, "=", mine, " but ", c.path, " has \"", key, "\": ", theirs),
      "the model's shape from config.json: a Hugging Face checkpoint fixes it",
      absl::StrCat("drop --", flag, " (and the config's ", flag, ") to take the checkpoint's"));
}

}  // namespace weft

#endif  // WEFT_MODELS_LM_HF_FILES_H_
