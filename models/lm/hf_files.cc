#include "models/lm/hf_files.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/base/status_macros.h"

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
