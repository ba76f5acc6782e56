// The JSON header of a safetensors file, as data: one entry per tensor
// (dtype name, shape, byte range in the buffer) plus optional string
// metadata. Parsing goes through weft's one JSON reader (core/base/json.h)
// and then checks the schema: shapes and offsets as exact int64s.
#ifndef WEFT_CHECKPOINT_SAFETENSORS_HEADER_H_
#define WEFT_CHECKPOINT_SAFETENSORS_HEADER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft::ckpt {

struct SafetensorsEntry {
  std::string dtype;  // "F32", "BF16", ...
  std::vector<int64_t> shape;
  int64_t begin = 0;  // data_offsets, relative to the byte buffer
  int64_t end = 0;
};

struct SafetensorsHeader {
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

// Compact JSON: metadata first (when any), then tensors in name order.
std::string SerializeSafetensorsHeader(const SafetensorsHeader& header);

// Parses the header JSON (trailing spaces allowed: the format pads with
// them). Checks syntax and field types, not offsets against a buffer.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view json);

}  // namespace weft::ckpt

#endif  // WEFT_CHECKPOINT_SAFETENSORS_HEADER_H_
