#include "checkpoint/safetensors_header.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"
#include "core/base/json.h"
#include "core/base/status_macros.h"

namespace weft::ckpt {
namespace {

constexpr char kMetadataKey[] = "__metadata__";
constexpr char kHint[] = "the file is corrupt or not in safetensors format";

void AppendQuoted(absl::string_view s, std::string& out) {
  absl::StrAppend(&out, "\"", JsonEscape(s), "\"");
}

absl::Status SchemaError(absl::string_view what, absl::string_view expected) {
  return InvalidArgument(absl::StrCat("safetensors header: ", what), expected, kHint);
}

absl::StatusOr<std::vector<int64_t>> IntArray(const JsonValue& v, const std::string& tensor,
                                              absl::string_view field) {
  const std::string what = absl::StrCat("tensor '", tensor, "' field \"", field, "\"");
  if (v.kind != JsonValue::Kind::kArray)
    return SchemaError(absl::StrCat(what, " is not an array"), "an array of integers");
  std::vector<int64_t> out;
  for (const JsonValue& item : v.array) {
    if (item.integer_overflowed()) {
      return SchemaError(absl::StrCat(what, " holds an integer that overflows int64"),
                         "shapes and offsets below 2^63");
    }
    if (item.is_number() && !item.AsInt64()) {
      return SchemaError(absl::StrCat(what, " holds a non-integer number ", item.number),
                         "integers only (shapes and offsets)");
    }
    if (!item.AsInt64() || *item.AsInt64() < 0) {
      return SchemaError(absl::StrCat(what, " holds a non-integer or negative entry"),
                         "non-negative integers");
    }
    out.push_back(*item.AsInt64());
  }
  return out;
}

absl::StatusOr<SafetensorsEntry> ParseEntry(const std::string& name, const JsonValue& v) {
  if (v.kind != JsonValue::Kind::kObject) {
    return SchemaError(absl::StrCat("tensor '", name, "' is not an object"),
                       "{\"dtype\", \"shape\", \"data_offsets\"}");
  }
  SafetensorsEntry e;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  for (const auto& [key, field] : v.object) {
    // Unknown fields are ignored, as the reference reader does.
    if (key == "dtype") {
      if (field.kind != JsonValue::Kind::kString) {
        return SchemaError(absl::StrCat("tensor '", name, "' dtype is not a string"),
                           "e.g. \"F32\"");
      }
      e.dtype = field.string;
      has_dtype = true;
    } else if (key == "shape") {
      WEFT_ASSIGN_OR_RETURN(e.shape, IntArray(field, name, key));
      has_shape = true;
    } else if (key == "data_offsets") {
      WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, IntArray(field, name, key));
      if (offsets.size() != 2 || offsets[0] > offsets[1]) {
        return SchemaError(
            absl::StrCat("tensor '", name, "' data_offsets [", absl::StrJoin(offsets, ", "), "]"),
            "[begin, end] with begin <= end");
      }
      e.begin = offsets[0];
      e.end = offsets[1];
      has_offsets = true;
    }
  }
  if (!has_dtype || !has_shape || !has_offsets) {
    return SchemaError(
        absl::StrCat("tensor '", name, "' lacks", has_dtype ? "" : " \"dtype\"",
                     has_shape ? "" : " \"shape\"", has_offsets ? "" : " \"data_offsets\""),
        "dtype, shape and data_offsets for every tensor");
  }
  return e;
}

}  // namespace

std::string SerializeSafetensorsHeader(const SafetensorsHeader& header) {
  std::string out = "{";
  bool first = true;
  auto comma = [&] {
    if (!first) out.push_back(',');
    first = false;
  };
  if (!header.metadata.empty()) {
    comma();
    AppendQuoted(kMetadataKey, out);
    out += ":{";
    bool first_meta = true;
    for (const auto& [key, value] : header.metadata) {
      if (!first_meta) out.push_back(',');
      first_meta = false;
      AppendQuoted(key, out);
      out.push_back(':');
      AppendQuoted(value, out);
    }
    out.push_back('}');
  }
  for (const auto& [name, e] : header.tensors) {
    comma();
    AppendQuoted(name, out);
    out += ":{\"dtype\":";
    AppendQuoted(e.dtype, out);
    absl::StrAppend(&out, ",\"shape\":[", absl::StrJoin(e.shape, ","), "],\"data_offsets\":[",
                    e.begin, ",", e.end, "]}");
  }
  out.push_back('}');
  return out;
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view json) {
  // Headers nest three levels; the bound keeps hostile input off the stack.
  WEFT_ASSIGN_OR_RETURN(
      JsonValue root,
      ParseJson(json, {.what = "safetensors header", .max_depth = 16, .hint = kHint}));
  if (root.kind != JsonValue::Kind::kObject) {
    return SchemaError("the header is not a JSON object", "{\"name\": {...}, ...}");
  }
  SafetensorsHeader header;
  bool has_metadata = false;
  for (const auto& [key, value] : root.object) {
    if (key == kMetadataKey) {
      if (has_metadata) return SchemaError("two \"__metadata__\" entries", "at most one");
      has_metadata = true;
      if (value.kind != JsonValue::Kind::kObject) {
        return SchemaError("\"__metadata__\" is not an object", "{string: string}");
      }
      for (const auto& [mkey, mvalue] : value.object) {
        if (mvalue.kind != JsonValue::Kind::kString) {
          return SchemaError(absl::StrCat("metadata '", mkey, "' is not a string"),
                             "string values only");
        }
        if (!header.metadata.emplace(mkey, mvalue.string).second) {
          return SchemaError(absl::StrCat("metadata key '", mkey, "' appears twice"),
                             "unique keys");
        }
      }
      continue;
    }
    WEFT_ASSIGN_OR_RETURN(SafetensorsEntry entry, ParseEntry(key, value));
    if (!header.tensors.emplace(key, std::move(entry)).second) {
      return SchemaError(absl::StrCat("tensor '", key, "' appears twice"), "unique names");
    }
  }
  return header;
}

}  // namespace weft::ckpt
