#include "models/lm/hf_files.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/str_format.h"
#include "checkpoint/safetensors.h"
#include "core/base/atomic_file.h"
#include "core/base/status_macros.h"
#include "data/tokenizer_factory.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<JsonValue> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(absl::StrCat("cannot read ", path), "a readable JSON file");
  std::stringstream text;
  text << in.rdbuf();
  return ParseJson(text.str(), {.what = path});
}

}  // namespace

bool IsHfCheckpoint(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "config.json", ec);
}

absl::StatusOr<HfConfig> ReadHfConfig(const std::string& dir) {
  HfConfig c;
  c.path = (fs::path(dir) / "config.json").string();
  WEFT_ASSIGN_OR_RETURN(c.json, ReadJsonFile(c.path));
  if (const JsonValue* a = c.json.Find("architectures");
      a != nullptr && a->is_array() && !a->array.empty() && a->array[0].is_string()) {
    c.architecture = a->array[0].string;
  }
  return c;
}

const JsonValue* HfField(const HfConfig& c, const char* key) {
  const JsonValue* v = c.json.Find(key);
  return v == nullptr || v->kind == JsonValue::Kind::kNull ? nullptr : v;
}

absl::StatusOr<double> HfNumber(const HfConfig& c, const char* key,
                                std::optional<double> fallback) {
  const JsonValue* v = HfField(c, key);
  if (v == nullptr) {
    if (fallback.has_value()) return *fallback;
    return InvalidArgument(absl::StrCat(c.path, " has no \"", key, "\""),
                           "a Hugging Face config.json of a causal LM",
                           "save the model with transformers' save_pretrained");
  }
  if (!v->is_number()) {
    return InvalidArgument(absl::StrCat(c.path, ": \"", key, "\" is not a number"), "a number");
  }
  return v->number;
}

absl::StatusOr<std::string> ReadHfTokenizer(const std::string& dir) {
  const std::string path = (fs::path(dir) / "tokenizer.json").string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::string();
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tok, data::LoadTokenizer(path));
  return tok->Serialize();
}

std::string HfTorchDtype(const std::string& dtype) {
  if (dtype == "BF16") return "bfloat16";
  if (dtype == "F16") return "float16";
  return "float32";
}

absl::Status WriteHfDirectory(const std::string& dir, const std::string& config_json,
                              const std::map<std::string, ckpt::HostTensor>& tensors,
                              const HfWriteOptions& options) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return FailedPrecondition(absl::StrCat("cannot create ", dir, ": ", ec.message()),
                              "a writable output directory");
  }
  const auto write = [&](const std::string& name, absl::string_view text) -> absl::Status {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> f,
                          AtomicFileWriter::Open((fs::path(dir) / name).string()));
    WEFT_RETURN_IF_ERROR(f->Write(text));
    return f->Commit();
  };
  const int64_t element = options.dtype == "F32" ? 4 : 2;
  int64_t total = 0;
  for (const auto& [name, t] : tensors) total += static_cast<int64_t>(t.values.size()) * element;
  const ckpt::SafetensorsWriteOptions st{.dtype = options.dtype, .metadata = {{"format", "pt"}}};
  if (total <= options.shard_bytes) {  // one file, written from the tensors as they are
    WEFT_RETURN_IF_ERROR(
        ckpt::WriteSafetensors((fs::path(dir) / "model.safetensors").string(), tensors, st));
  } else {
    // Shards in name order, each up to shard_bytes (a larger tensor alone).
    std::vector<std::map<std::string, ckpt::HostTensor>> shards(1);
    int64_t in_shard = 0;
    for (const auto& [name, t] : tensors) {
      const int64_t bytes = static_cast<int64_t>(t.values.size()) * element;
      if (in_shard > 0 && in_shard + bytes > options.shard_bytes) {
        shards.emplace_back();
        in_shard = 0;
      }
      shards.back().emplace(name, t);
      in_shard += bytes;
    }
    if (shards.size() == 1) {  // one tensor over shard_bytes: still one file
      return WriteHfDirectory(dir, config_json, tensors,
                              {.dtype = options.dtype, .shard_bytes = total, .files = options.files});
    }
    std::string index = absl::StrCat("{\n  \"metadata\": {\"total_size\": ", total,
                                     "},\n  \"weight_map\": {");
    bool first = true;
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::string file = absl::StrFormat("model-%05d-of-%05d.safetensors", i + 1,
                                               shards.size());
      WEFT_RETURN_IF_ERROR(
          ckpt::WriteSafetensors((fs::path(dir) / file).string(), shards[i], st));
      for (const auto& [name, t] : shards[i]) {
        absl::StrAppend(&index, first ? "\n    " : ",\n    ", "\"", JsonEscape(name), "\": \"",
                        JsonEscape(file), "\"");
        first = false;
      }
    }
    absl::StrAppend(&index, "\n  }\n}\n");
    WEFT_RETURN_IF_ERROR(write("model.safetensors.index.json", index));
  }
  for (const auto& [name, text] : options.files) WEFT_RETURN_IF_ERROR(write(name, text));
  return write("config.json", config_json);
}

absl::StatusOr<std::map<std::string, ckpt::HostTensor>> ReadHfTensors(const std::string& dir) {
  // One model.safetensors, or the shards its index lists.
  std::vector<std::string> files;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::is_regular_file(index, ec)) {
    WEFT_ASSIGN_OR_RETURN(JsonValue j, ReadJsonFile(index.string()));
    const JsonValue* map = j.Find("weight_map");
    if (map == nullptr || !map->is_object()) {
      return InvalidArgument(absl::StrCat(index.string(), " has no weight_map"),
                             "an index mapping tensor names to shard files");
    }
    std::set<std::string> shards;
    for (const auto& [name, file] : map->object) {
      if (file.is_string()) shards.insert(file.string);
    }
    for (const std::string& s : shards) files.push_back((fs::path(dir) / s).string());
  } else {
    files.push_back((fs::path(dir) / "model.safetensors").string());
  }
  std::map<std::string, ckpt::HostTensor> out;
  for (const std::string& f : files) {
    WEFT_ASSIGN_OR_RETURN(ckpt::SafetensorsFile file, ckpt::ReadSafetensors(f));
    for (auto& [name, t] : file.tensors) out.emplace(name, std::move(t));
  }
  return out;
}

}  // namespace weft
