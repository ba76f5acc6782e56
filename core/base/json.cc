#include "core/base/json.h"

#include <cstdlib>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/errors.h"

namespace weft {

class JsonParser {
 public:
  JsonParser(absl::string_view text, const JsonParseOptions& options) : t_(text), o_(options) {}

  absl::StatusOr<JsonValue> Document() {
    JsonValue v;
    if (!Value(v, 0)) return Error();
    Space();
    if (i_ != t_.size()) {
      Fail("trailing characters after the value", "the end of the text");
      return Error();
    }
    return v;
  }

 private:
  absl::Status Error() const {
    std::string hint(o_.hint);
    if (i_ < t_.size()) {
      absl::StrAppend(&hint, hint.empty() ? "" : "; ", "near \"", t_.substr(i_, 20), "\"");
    }
    return InvalidArgument(absl::StrCat(o_.what, ": ", what_, " at byte ", i_), expected_, hint);
  }

  bool Fail(std::string what, std::string expected) {
    what_ = std::move(what);
    expected_ = std::move(expected);
    return false;
  }

  bool At(char c) const { return i_ < t_.size() && t_[i_] == c; }
  bool Digit() const { return i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9'; }

  void Space() {
    while (i_ < t_.size() &&
           (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\r' || t_[i_] == '\t')) {
      ++i_;
    }
  }

  bool Word(absl::string_view word) {
    if (t_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  bool Value(JsonValue& v, int depth) {
    if (depth > o_.max_depth) {
      return Fail("nested too deeply", absl::StrCat("at most ", o_.max_depth, " levels"));
    }
    Space();
    if (i_ >= t_.size()) return Fail("unexpected end", "a JSON value");
    const char c = t_[i_];
    if (c == '{') return Object(v, depth);
    if (c == '[') return Array(v, depth);
    if (c == '"') {
      v.kind = JsonValue::Kind::kString;
      return String(v.string);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return Number(v);
    if (Word("true") || Word("false")) {
      v.kind = JsonValue::Kind::kBool;
      v.boolean = c == 't';
      return true;
    }
    if (Word("null")) return true;
    return Fail(absl::StrFormat("unexpected character '%c'", c), "a JSON value");
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  bool Number(JsonValue& v) {
    const size_t start = i_;
    const bool negative = At('-');
    if (negative) ++i_;
    if (!Digit()) return Fail("'-' without digits", "a number");
    const size_t int_start = i_;
    if (At('0')) {
      ++i_;
      if (Digit()) return Fail("number with a leading zero", "JSON numbers (no leading zeros)");
    } else {
      while (Digit()) ++i_;
    }
    const size_t int_end = i_;
    bool integral = true;
    if (At('.')) {
      integral = false;
      ++i_;
      if (!Digit()) return Fail("'.' without digits", "digits after the decimal point");
      while (Digit()) ++i_;
    }
    if (At('e') || At('E')) {
      integral = false;
      ++i_;
      if (At('+') || At('-')) ++i_;
      if (!Digit()) return Fail("exponent without digits", "digits after 'e'");
      while (Digit()) ++i_;
    }
    const std::string literal(t_.substr(start, i_ - start));
    v.kind = JsonValue::Kind::kNumber;
    v.number = std::strtod(literal.c_str(), nullptr);
    if (integral) {
      // Accumulate negatively: int64's range reaches one further below zero.
      int64_t value = 0;
      bool overflow = false;
      constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
      for (size_t k = int_start; k < int_end && !overflow; ++k) {
        const int digit = t_[k] - '0';
        if (value < (kMin + digit) / 10) {
          overflow = true;
        } else {
          value = value * 10 - digit;
        }
      }
      if (!negative && !overflow && value == kMin) overflow = true;
      v.integer_overflowed_ = overflow;
      if (!overflow) v.integer_ = negative ? value : -value;
    }
    return true;
  }

  bool Hex4(uint32_t& out) {
    if (i_ + 4 > t_.size()) return Fail("truncated \\u escape", "4 hex digits");
    out = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = t_[i_++];
      out <<= 4;
      if (h >= '0' && h <= '9') {
        out |= static_cast<uint32_t>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        out |= static_cast<uint32_t>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        out |= static_cast<uint32_t>(h - 'A' + 10);
      } else {
        return Fail("bad hex digit in \\u escape", "4 hex digits");
      }
    }
    return true;
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

  bool Escape(std::string& out) {
    if (i_ >= t_.size()) return Fail("unterminated escape", "an escape character");
    const char e = t_[i_++];
    switch (e) {
      case '"':
      case '\\':
      case '/':
        out.push_back(e);
        return true;
      case 'b':
        out.push_back('\b');
        return true;
      case 'f':
        out.push_back('\f');
        return true;
      case 'n':
        out.push_back('\n');
        return true;
      case 'r':
        out.push_back('\r');
        return true;
      case 't':
        out.push_back('\t');
        return true;
      case 'u': {
        uint32_t cp = 0;
        if (!Hex4(cp)) return false;
        if (cp >= 0xdc00 && cp <= 0xdfff) {
          return Fail("lone low surrogate in \\u escape", "a high surrogate first");
        }
        if (cp >= 0xd800 && cp <= 0xdbff) {
          // Characters beyond the BMP come as a UTF-16 surrogate pair.
          uint32_t low = 0;
          if (!Word("\\u")) return Fail("unpaired high surrogate", "\\uDC00-\\uDFFF next");
          if (!Hex4(low)) return false;
          if (low < 0xdc00 || low > 0xdfff) {
            return Fail("unpaired high surrogate", "\\uDC00-\\uDFFF next");
          }
          cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
        }
        AppendUtf8(cp, out);
        return true;
      }
      default:
        return Fail(absl::StrFormat("unknown escape '\\%c'", e), "one of \\\" \\\\ / b f n r t u");
    }
  }

  bool String(std::string& out) {
    ++i_;  // opening quote
    while (true) {
      if (i_ >= t_.size()) return Fail("unterminated string", "a closing '\"'");
      const char c = t_[i_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) {
        --i_;
        return Fail("raw control character in a string", "it escaped (\\n, \\u0001, ...)");
      }
      if (c != '\\') {
        out.push_back(c);
      } else if (!Escape(out)) {
        return false;
      }
    }
  }

  bool Array(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::kArray;
    ++i_;
    Space();
    if (At(']')) {
      ++i_;
      return true;
    }
    while (true) {
      v.array.emplace_back();
      if (!Value(v.array.back(), depth + 1)) return false;
      Space();
      if (At(',')) {
        ++i_;
        continue;
      }
      if (At(']')) {
        ++i_;
        return true;
      }
      return Fail(i_ >= t_.size() ? "unterminated array" : "bad separator in an array",
                  "',' or ']'");
    }
  }

  bool Object(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::kObject;
    ++i_;
    Space();
    if (At('}')) {
      ++i_;
      return true;
    }
    while (true) {
      Space();
      if (!At('"')) {
        return Fail(i_ >= t_.size() ? "unterminated object" : "expected a key", "a quoted key");
      }
      std::string key;
      if (!String(key)) return false;
      Space();
      if (!At(':')) return Fail("missing ':' after an object key", "':'");
      ++i_;
      v.object.emplace_back(std::move(key), JsonValue());
      if (!Value(v.object.back().second, depth + 1)) return false;
      Space();
      if (At(',')) {
        ++i_;
        continue;
      }
      if (At('}')) {
        ++i_;
        return true;
      }
      return Fail(i_ >= t_.size() ? "unterminated object" : "bad separator in an object",
                  "',' or '}'");
    }
  }

  absl::string_view t_;
  const JsonParseOptions& o_;
  size_t i_ = 0;
  std::string what_, expected_;
};

const JsonValue* JsonValue::Find(absl::string_view key) const {
  for (const auto& [k, v] : object) {
    if (k == key) return &v;
  }
  return nullptr;
}

absl::StatusOr<JsonValue> ParseJson(absl::string_view text, const JsonParseOptions& options) {
  return JsonParser(text, options).Document();
}

std::string JsonEscape(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
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
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out.push_back(c);
        }
    }
  }
  return out;
}

}  // namespace weft
