#include "data/char_tokenizer.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"

namespace weft::data {
namespace {

constexpr char kHeader[] = "weft-tokenizer char v1";

inline bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// The unit starting at text[pos] and its length in bytes: a code point for a
// well-formed UTF-8 sequence (no overlong forms, no surrogates, at most
// U+10FFFF), else kRawByteBase + the byte, one byte long.
uint32_t NextUnit(absl::string_view text, size_t pos, size_t* len) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  const size_t left = text.size() - pos;
  const uint8_t b0 = s[0];
  *len = 1;
  if (b0 < 0x80) return b0;
  size_t n;
  uint32_t cp;
  uint32_t min_cp;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1F, min_cp = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0F, min_cp = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07, min_cp = 0x10000;
  } else {
    return CharTokenizer::kRawByteBase + b0;
  }
  if (left < n) return CharTokenizer::kRawByteBase + b0;
  for (size_t i = 1; i < n; ++i) {
    if (!IsContinuation(s[i])) return CharTokenizer::kRawByteBase + b0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return CharTokenizer::kRawByteBase + b0;
  }
  *len = n;
  return cp;
}

void AppendUnit(uint32_t unit, std::string* out) {
  if (unit >= CharTokenizer::kRawByteBase) {
    out->push_back(static_cast<char>(unit - CharTokenizer::kRawByteBase));
  } else if (unit < 0x80) {
    out->push_back(static_cast<char>(unit));
  } else if (unit < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (unit >> 6)));
    out->push_back(static_cast<char>(0x80 | (unit & 0x3F)));
  } else if (unit < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (unit >> 12)));
    out->push_back(static_cast<char>(0x80 | ((unit >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (unit & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (unit >> 18)));
    out->push_back(static_cast<char>(0x80 | ((unit >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((unit >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (unit & 0x3F)));
  }
}

bool IsValidUnit(uint32_t unit) {
  if (unit >= CharTokenizer::kRawByteBase) {
    return unit - CharTokenizer::kRawByteBase >= 0x80 && unit - CharTokenizer::kRawByteBase < 0x100;
  }
  return unit <= 0x10FFFF && !(unit >= 0xD800 && unit <= 0xDFFF);
}

std::string DescribeUnit(uint32_t unit) {
  if (unit >= CharTokenizer::kRawByteBase) {
    return absl::StrFormat("raw byte 0x%02X", unit - CharTokenizer::kRawByteBase);
  }
  if (unit >= 0x20 && unit < 0x7F) return absl::StrFormat("'%c' (U+%04X)", unit, unit);
  std::string utf8;
  AppendUnit(unit, &utf8);
  return absl::StrFormat("U+%04X", unit) + (unit >= 0x80 ? " '" + utf8 + "'" : "");
}

}  // namespace

CharTokenizer::CharTokenizer(std::vector<uint32_t> units) : units_(std::move(units)) {
  ascii_.fill(-1);
  for (size_t id = 0; id < units_.size(); ++id) {
    if (units_[id] < 0x80) {
      ascii_[units_[id]] = static_cast<int32_t>(id);
    } else {
      others_[units_[id]] = static_cast<int32_t>(id);
    }
  }
}

absl::StatusOr<std::unique_ptr<CharTokenizer>> CharTokenizer::Build(
    absl::Span<const absl::string_view> documents) {
  std::array<bool, 128> ascii{};
  absl::flat_hash_set<uint32_t> others;
  size_t total = 0;
  for (absl::string_view doc : documents) {
    total += doc.size();
    size_t len;
    for (size_t pos = 0; pos < doc.size(); pos += len) {
      const uint32_t unit = NextUnit(doc, pos, &len);
      if (unit < 0x80) {
        ascii[unit] = true;
      } else {
        others.insert(unit);
      }
    }
  }
  if (total == 0) {
    return InvalidArgument("empty corpus for the char tokenizer", "at least one character",
                           "check that the input files are not empty");
  }
  std::vector<uint32_t> units;
  for (uint32_t c = 0; c < 128; ++c) {
    if (ascii[c]) units.push_back(c);
  }
  std::vector<uint32_t> rest(others.begin(), others.end());
  std::sort(rest.begin(), rest.end());
  units.insert(units.end(), rest.begin(), rest.end());
  return std::unique_ptr<CharTokenizer>(new CharTokenizer(std::move(units)));
}

absl::StatusOr<std::unique_ptr<CharTokenizer>> CharTokenizer::Parse(absl::string_view contents,
                                                                    absl::string_view name) {
  std::vector<absl::string_view> lines = absl::StrSplit(contents, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  const auto bad = [&](absl::string_view what) {
    return InvalidArgument(absl::StrCat("char tokenizer file '", name, "': ", what),
                           "the format Save writes (header, count, one unit per line)",
                           "regenerate it with //tools:prepare_data");
  };
  if (lines.size() < 2 || lines[0] != kHeader) return bad("missing 'weft-tokenizer char v1'");
  int64_t count = 0;
  if (!absl::SimpleAtoi(lines[1], &count) || count < 1) {
    return bad(absl::StrCat("bad character count '", lines[1], "'"));
  }
  if (static_cast<int64_t>(lines.size()) - 2 != count) {
    return bad(absl::StrCat("header says ", count, " characters, file lists ",
                            lines.size() - 2));
  }
  std::vector<uint32_t> units;
  units.reserve(count);
  for (size_t i = 2; i < lines.size(); ++i) {
    uint32_t unit = 0;
    if (!absl::SimpleAtoi(lines[i], &unit) || !IsValidUnit(unit)) {
      return bad(absl::StrCat("bad unit '", lines[i], "' on line ", i + 1));
    }
    if (!units.empty() && unit <= units.back()) {
      return bad(absl::StrCat("units not strictly ascending on line ", i + 1));
    }
    units.push_back(unit);
  }
  return std::unique_ptr<CharTokenizer>(new CharTokenizer(std::move(units)));
}

absl::Status CharTokenizer::EncodeAppend(absl::string_view text,
                                         std::vector<int32_t>* ids) const {
  ids->reserve(ids->size() + text.size());
  size_t len = 1;
  for (size_t pos = 0; pos < text.size(); pos += len) {
    const uint8_t b = static_cast<uint8_t>(text[pos]);
    int32_t id;
    uint32_t unit = b;
    if (b < 0x80) {
      len = 1;
      id = ascii_[b];
    } else {
      unit = NextUnit(text, pos, &len);
      const auto it = others_.find(unit);
      id = it == others_.end() ? -1 : it->second;
    }
    if (id < 0) {
      return InvalidArgument(
          absl::StrCat("character ", DescribeUnit(unit), " at byte offset ", pos,
                       " is not in the char vocabulary (", units_.size(), " characters)"),
          "only characters seen when the vocabulary was built",
          "rebuild the tokenizer from a corpus that contains this text, or use "
          "--tokenizer=bpe, which encodes any bytes");
    }
    ids->push_back(id);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CharTokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= static_cast<int32_t>(units_.size())) {
      return InvalidArgument(absl::StrCat("token id ", id, " at position ", i),
                             absl::StrCat("ids in [0, ", units_.size(), ") for this char vocabulary"));
    }
    AppendUnit(units_[id], &out);
  }
  return out;
}

std::string CharTokenizer::Serialize() const {
  std::string out = absl::StrCat(kHeader, "\n", units_.size(), "\n");
  for (uint32_t unit : units_) absl::StrAppend(&out, unit, "\n");
  return out;
}

}  // namespace weft::data
