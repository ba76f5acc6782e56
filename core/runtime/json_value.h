// JsonValue: a small JSON reader for the files weft writes itself (metrics
// JSON lines, Chrome traces), so the report tool and tests need no JSON
// library. It parses the whole of RFC 8259 except \u escapes outside the
// Basic Multilingual Plane, which it keeps as '?'.
#ifndef WEFT_CORE_RUNTIME_JSON_VALUE_H_
#define WEFT_CORE_RUNTIME_JSON_VALUE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  // Keys in file order, so a report can show a record's fields as written.
  std::vector<std::pair<std::string, JsonValue>> object;

  bool is_number() const { return kind == Kind::kNumber; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_object() const { return kind == Kind::kObject; }
  bool is_array() const { return kind == Kind::kArray; }
  // The member `key` of an object, or null when absent (or not an object).
  const JsonValue* Find(absl::string_view key) const;
};

// Parses one JSON text; trailing non-space characters are an error.
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

// Escapes `s` as the inside of a JSON string (quotes, backslashes, control
// characters).
std::string JsonEscape(absl::string_view s);

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_JSON_VALUE_H_
