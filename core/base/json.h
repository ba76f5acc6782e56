// JsonValue: weft's one JSON reader, for the files it writes and reads
// itself (metrics JSON lines, Chrome traces, safetensors headers), so no
// package needs a JSON library. Strict RFC 8259: the number grammar
// (no leading zeros, no bare '.'), escapes including UTF-16 surrogate
// pairs, no raw control characters in strings.
//
// Numbers keep both readings: `number` as a double, and the exact int64
// when the literal is an integer that fits (shapes and byte offsets above
// 2^53 would lose digits as doubles).
#ifndef WEFT_CORE_BASE_JSON_H_
#define WEFT_CORE_BASE_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
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
  // Keys in file order, duplicates kept, so a reader can show a record's
  // fields as written and a strict schema can reject repeated keys.
  std::vector<std::pair<std::string, JsonValue>> object;

  bool is_number() const { return kind == Kind::kNumber; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_object() const { return kind == Kind::kObject; }
  bool is_array() const { return kind == Kind::kArray; }
  // The member `key` of an object (the first, if repeated), or null when
  // absent or not an object.
  const JsonValue* Find(absl::string_view key) const;

  // The exact value of an integer literal ("12", "-3"), or nullopt for
  // non-numbers, fractions and exponents ("1.0", "1e3") and integers
  // outside int64 (`overflowed` says which).
  std::optional<int64_t> AsInt64() const { return integer_; }
  bool integer_overflowed() const { return integer_overflowed_; }

 private:
  friend class JsonParser;
  std::optional<int64_t> integer_;
  bool integer_overflowed_ = false;
};

struct JsonParseOptions {
  // Names the document in errors: "safetensors header: ...".
  absl::string_view what = "JSON";
  // Deeper nesting is an error (keeps hostile input off the stack).
  int max_depth = 256;
  // Appended to every syntax error as the hint.
  absl::string_view hint = "";
};

// Parses one JSON text; trailing non-space characters are an error.
absl::StatusOr<JsonValue> ParseJson(absl::string_view text, const JsonParseOptions& options = {});

// Escapes `s` as the inside of a JSON string (quotes, backslashes, control
// characters); UTF-8 passes through.
std::string JsonEscape(absl::string_view s);

}  // namespace weft

#endif  // WEFT_CORE_BASE_JSON_H_
