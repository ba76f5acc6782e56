#include "checkpoint/safetensors_header.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft::ckpt {
namespace {

constexpr char kMetadataKey[] = "__metadata__";
constexpr char kHint[] = "the file is corrupt or not in safetensors format";

// ---- Serialization ----

void AppendQuoted(absl::string_view s, std::string& out) {
  out.push_back('"');
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        // Other control characters must be escaped; UTF-8 passes through.
        if (c < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

// ---- Parsing: a generic JSON value, then the safetensors schema ----

struct Json {
  enum class Kind { kNull, kBool, kInt, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  int64_t integer = 0;
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;  // file order, duplicates kept
};

class JsonParser {
 public:
  explicit JsonParser(absl::string_view text) : s_(text) {}

  absl::StatusOr<Json> ParseDocument() {
    WEFT_ASSIGN_OR_RETURN(Json v, ParseValue(0));
    SkipSpace();
    if (pos_ != s_.size()) return Error("trailing characters after the JSON object", "end");
    return v;
  }

 private:
  // Headers nest three levels; the bound keeps hostile input off the stack.
  static constexpr int kMaxDepth = 16;

  absl::Status Error(absl::string_view what, absl::string_view expected) const {
    return InvalidArgument(absl::StrCat("safetensors header: ", what, " at byte ", pos_), expected,
                           kHint);
  }

  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) {
      ++pos_;
    }
  }

  bool Consume(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  absl::StatusOr<Json> ParseValue(int depth) {
    if (depth > kMaxDepth) return Error("JSON nested too deeply", "at most 16 levels");
    SkipSpace();
    if (pos_ >= s_.size()) return Error("unexpected end of header", "a JSON value");
    const char c = s_[pos_];
    Json v;
    if (c == '{') {
      v.kind = Json::Kind::kObject;
      ++pos_;
      if (Consume('}')) return v;
      do {
        SkipSpace();
        WEFT_ASSIGN_OR_RETURN(std::string key, ParseString());
        if (!Consume(':')) return Error("missing ':' after an object key", "':'");
        WEFT_ASSIGN_OR_RETURN(Json value, ParseValue(depth + 1));
        v.object.emplace_back(std::move(key), std::move(value));
      } while (Consume(','));
      if (!Consume('}')) return Error("unterminated object", "',' or '}'");
    } else if (c == '[') {
      v.kind = Json::Kind::kArray;
      ++pos_;
      if (Consume(']')) return v;
      do {
        WEFT_ASSIGN_OR_RETURN(Json item, ParseValue(depth + 1));
        v.array.push_back(std::move(item));
      } while (Consume(','));
      if (!Consume(']')) return Error("unterminated array", "',' or ']'");
    } else if (c == '"') {
      v.kind = Json::Kind::kString;
      WEFT_ASSIGN_OR_RETURN(v.string, ParseString());
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Json::Kind::kInt;
      WEFT_ASSIGN_OR_RETURN(v.integer, ParseInteger());
    } else if (ConsumeWord("true") || ConsumeWord("false")) {
      v.kind = Json::Kind::kBool;
    } else if (ConsumeWord("null")) {
      v.kind = Json::Kind::kNull;
    } else {
      return Error(absl::StrFormat("unexpected character '%c'", c), "a JSON value");
    }
    return v;
  }

  bool ConsumeWord(absl::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  absl::StatusOr<int64_t> ParseInteger() {
    const bool negative = s_[pos_] == '-';
    if (negative) ++pos_;
    const size_t start = pos_;
    uint64_t value = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const uint64_t digit = static_cast<uint64_t>(s_[pos_] - '0');
      if (value > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10) {
        return Error("integer overflows int64", "a shape or offset below 2^63");
      }
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) return Error("'-' without digits", "a number");
    if (s_[start] == '0' && pos_ - start > 1) return Error("integer with a leading zero", "JSON");
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E')) {
      return Error("non-integer number", "integers only (shapes and offsets)");
    }
    return negative ? -static_cast<int64_t>(value) : static_cast<int64_t>(value);
  }

  absl::StatusOr<uint32_t> ParseHex4() {
    if (pos_ + 4 > s_.size()) return Error("truncated \\u escape", "4 hex digits");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') {
        v |= static_cast<uint32_t>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        v |= static_cast<uint32_t>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        v |= static_cast<uint32_t>(h - 'A' + 10);
      } else {
        return Error("bad hex digit in \\u escape", "4 hex digits");
      }
    }
    return v;
  }

  static void AppendUtf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  absl::StatusOr<std::string> ParseString() {
    if (pos_ >= s_.size() || s_[pos_] != '"') return Error("expected a string", "'\"'");
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) return Error("unterminated string", "a closing '\"'");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error("raw control character in a string", "it escaped (\\n, \\u0001, ...)");
      }
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) return Error("unterminated escape", "an escape character");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          WEFT_ASSIGN_OR_RETURN(uint32_t cp, ParseHex4());
          if (cp >= 0xdc00 && cp <= 0xdfff) {
            return Error("lone low surrogate in \\u escape", "a high surrogate first");
          }
          if (cp >= 0xd800 && cp <= 0xdbff) {
            // Characters beyond the BMP come as a UTF-16 surrogate pair.
            if (!ConsumeWord("\\u")) return Error("unpaired high surrogate", "\\uDC00-\\uDFFF");
            WEFT_ASSIGN_OR_RETURN(uint32_t low, ParseHex4());
            if (low < 0xdc00 || low > 0xdfff) {
              return Error("unpaired high surrogate", "\\uDC00-\\uDFFF");
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Error(absl::StrFormat("unknown escape '\\%c'", e),
                       "one of \\\" \\\\ / b f n r t u");
      }
    }
  }

  absl::string_view s_;
  size_t pos_ = 0;
};

absl::Status SchemaError(absl::string_view what, absl::string_view expected) {
  return InvalidArgument(absl::StrCat("safetensors header: ", what), expected, kHint);
}

absl::StatusOr<std::vector<int64_t>> IntArray(const Json& v, const std::string& tensor,
                                              absl::string_view field) {
  const std::string what = absl::StrCat("tensor '", tensor, "' field \"", field, "\"");
  if (v.kind != Json::Kind::kArray)
    return SchemaError(absl::StrCat(what, " is not an array"), "an array of integers");
  std::vector<int64_t> out;
  for (const Json& item : v.array) {
    if (item.kind != Json::Kind::kInt || item.integer < 0) {
      return SchemaError(absl::StrCat(what, " holds a non-integer or negative entry"),
                         "non-negative integers");
    }
    out.push_back(item.integer);
  }
  return out;
}

absl::StatusOr<SafetensorsEntry> ParseEntry(const std::string& name, const Json& v) {
  if (v.kind != Json::Kind::kObject) {
    return SchemaError(absl::StrCat("tensor '", name, "' is not an object"),
                       "{\"dtype\", \"shape\", \"data_offsets\"}");
  }
  SafetensorsEntry e;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  for (const auto& [key, field] : v.object) {
    // Unknown fields are ignored, as the reference reader does.
    if (key == "dtype") {
      if (field.kind != Json::Kind::kString) {
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
  WEFT_ASSIGN_OR_RETURN(Json root, JsonParser(json).ParseDocument());
  if (root.kind != Json::Kind::kObject) {
    return SchemaError("the header is not a JSON object", "{\"name\": {...}, ...}");
  }
  SafetensorsHeader header;
  bool has_metadata = false;
  for (const auto& [key, value] : root.object) {
    if (key == kMetadataKey) {
      if (has_metadata) return SchemaError("two \"__metadata__\" entries", "at most one");
      has_metadata = true;
      if (value.kind != Json::Kind::kObject) {
        return SchemaError("\"__metadata__\" is not an object", "{string: string}");
      }
      for (const auto& [mkey, mvalue] : value.object) {
        if (mvalue.kind != Json::Kind::kString) {
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
