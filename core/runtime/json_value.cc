#include "core/runtime/json_value.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/errors.h"

namespace weft {
namespace {

class Parser {
 public:
  explicit Parser(absl::string_view text) : t_(text) {}

  absl::StatusOr<JsonValue> Document() {
    JsonValue v;
    if (!Value(v, 0)) return Error();
    Space();
    if (i_ != t_.size()) {
      what_ = "trailing characters";
      return Error();
    }
    return v;
  }

 private:
  absl::Status Error() const {
    return InvalidArgument(absl::StrCat("invalid JSON at offset ", i_, ": ", what_), "a JSON value",
                           absl::StrCat("near \"", t_.substr(i_, 20), "\""));
  }
  void Space() {
    while (i_ < t_.size() &&
           (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\r' || t_[i_] == '\t')) {
      ++i_;
    }
  }
  bool Fail(const char* what) {
    what_ = what;
    return false;
  }
  bool Literal(absl::string_view word) {
    if (t_.substr(i_, word.size()) != word) return Fail("unknown literal");
    i_ += word.size();
    return true;
  }

  bool Value(JsonValue& v, int depth) {
    if (depth > 256) return Fail("nesting too deep");
    Space();
    if (i_ >= t_.size()) return Fail("unexpected end");
    const char c = t_[i_];
    if (c == '{') return Object(v, depth);
    if (c == '[') return Array(v, depth);
    if (c == '"') {
      v.kind = JsonValue::Kind::kString;
      return String(v.string);
    }
    if (c == 't' || c == 'f') {
      v.kind = JsonValue::Kind::kBool;
      v.boolean = c == 't';
      return Literal(c == 't' ? "true" : "false");
    }
    if (c == 'n') return Literal("null");
    return Number(v);
  }

  bool Number(JsonValue& v) {
    const size_t start = i_;
    if (i_ < t_.size() && t_[i_] == '-') ++i_;
    while (i_ < t_.size() && (std::isdigit(static_cast<unsigned char>(t_[i_])) || t_[i_] == '.' ||
                              t_[i_] == 'e' || t_[i_] == 'E' || t_[i_] == '+' || t_[i_] == '-')) {
      ++i_;
    }
    if (i_ == start) return Fail("expected a value");
    const std::string digits(t_.substr(start, i_ - start));
    char* end = nullptr;
    v.number = std::strtod(digits.c_str(), &end);
    if (end != digits.c_str() + digits.size()) return Fail("malformed number");
    v.kind = JsonValue::Kind::kNumber;
    return true;
  }

  bool String(std::string& out) {
    ++i_;  // opening quote
    while (i_ < t_.size() && t_[i_] != '"') {
      char c = t_[i_++];
      if (static_cast<unsigned char>(c) < 0x20) return Fail("control character in string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ >= t_.size()) return Fail("unfinished escape");
      c = t_[i_++];
      switch (c) {
        case '"':
        case '\\':
        case '/':
          out.push_back(c);
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
          if (i_ + 4 > t_.size()) return Fail("short \\u escape");
          const unsigned code = std::strtoul(std::string(t_.substr(i_, 4)).c_str(), nullptr, 16);
          i_ += 4;
          if (code < 0x80) {
            out.push_back(static_cast<char>(code));
          } else if (code < 0x800) {
            out.push_back(static_cast<char>(0xC0 | (code >> 6)));
            out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
          } else if (code >= 0xD800 && code < 0xE000) {
            out.push_back('?');  // half of a surrogate pair
          } else {
            out.push_back(static_cast<char>(0xE0 | (code >> 12)));
            out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
          }
          break;
        }
        default:
          return Fail("unknown escape");
      }
    }
    if (i_ >= t_.size()) return Fail("unterminated string");
    ++i_;
    return true;
  }

  bool Array(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::kArray;
    ++i_;
    Space();
    if (i_ < t_.size() && t_[i_] == ']') {
      ++i_;
      return true;
    }
    while (true) {
      v.array.emplace_back();
      if (!Value(v.array.back(), depth + 1)) return false;
      Space();
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < t_.size() && t_[i_] == ']') {
        ++i_;
        return true;
      }
      return Fail("expected ',' or ']'");
    }
  }

  bool Object(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::kObject;
    ++i_;
    Space();
    if (i_ < t_.size() && t_[i_] == '}') {
      ++i_;
      return true;
    }
    while (true) {
      Space();
      if (i_ >= t_.size() || t_[i_] != '"') return Fail("expected a key");
      std::string key;
      if (!String(key)) return false;
      Space();
      if (i_ >= t_.size() || t_[i_] != ':') return Fail("expected ':'");
      ++i_;
      v.object.emplace_back(std::move(key), JsonValue());
      if (!Value(v.object.back().second, depth + 1)) return false;
      Space();
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < t_.size() && t_[i_] == '}') {
        ++i_;
        return true;
      }
      return Fail("expected ',' or '}'");
    }
  }

  absl::string_view t_;
  size_t i_ = 0;
  const char* what_ = "";
};

}  // namespace

const JsonValue* JsonValue::Find(absl::string_view key) const {
  for (const auto& [k, v] : object) {
    if (k == key) return &v;
  }
  return nullptr;
}

absl::StatusOr<JsonValue> ParseJson(absl::string_view text) { return Parser(text).Document(); }

std::string JsonEscape(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
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
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out.push_back(c);
        }
    }
  }
  return out;
}

}  // namespace weft
