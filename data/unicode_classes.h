// Unicode classes of UTF-8 text, for pre-tokenizers that follow a regex
// over Unicode properties (gpt2_pretokenizer.h): letters (\p{L}), numbers
// (\p{N}) and white space (\s). The letter and number ranges are generated
// from Unicode's tables (unicode_ranges.inc, gen_unicode_ranges.py).
#ifndef WEFT_DATA_UNICODE_CLASSES_H_
#define WEFT_DATA_UNICODE_CLASSES_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace weft::data {

// What an invalid or truncated UTF-8 sequence decodes to: one byte that is
// neither a letter, a number nor white space.
inline constexpr char32_t kInvalidCodePoint = 0xFFFFFFFF;

struct CodePoint {
  char32_t value = kInvalidCodePoint;
  int length = 1;  // bytes
};

// The code point starting at text[pos] (pos < text.size()).
CodePoint DecodeUtf8(absl::string_view text, size_t pos);

bool IsLetter(char32_t c);      // general category L*
bool IsNumber(char32_t c);      // general category N*
bool IsWhiteSpace(char32_t c);  // the White_Space property

}  // namespace weft::data

#endif  // WEFT_DATA_UNICODE_CLASSES_H_
