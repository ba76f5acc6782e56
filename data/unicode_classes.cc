#include "data/unicode_classes.h"

#include <algorithm>
#include <cstdint>

namespace weft::data {
namespace {

struct CodePointRange {
  char32_t first, last;
};

#include "data/unicode_ranges.inc"

template <size_t N>
bool InRanges(const CodePointRange (&ranges)[N], char32_t c) {
  const CodePointRange* it = std::upper_bound(
      ranges, ranges + N, c, [](char32_t v, const CodePointRange& r) { return v < r.first; });
  return it != ranges && c <= (it - 1)->last;
}

}  // namespace

CodePoint DecodeUtf8(absl::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t b0 = byte(pos);
  if (b0 < 0x80) return {b0, 1};
  int length;
  char32_t value, min;
  if ((b0 & 0xE0) == 0xC0) {
    length = 2, value = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3, value = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4, value = b0 & 0x07, min = 0x10000;
  } else {
    return {};
  }
  if (pos + length > text.size()) return {};
  for (int i = 1; i < length; ++i) {
    const uint8_t b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return {};
    value = (value << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  if (value < min || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return {};
  return {value, length};
}

bool IsLetter(char32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  return c != kInvalidCodePoint && InRanges(kLetterRanges, c);
}

bool IsNumber(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return c != kInvalidCodePoint && InRanges(kNumberRanges, c);
}

bool IsWhiteSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

}  // namespace weft::data
