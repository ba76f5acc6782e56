#include "data/gpt2_pretokenizer.h"

#include "data/unicode_classes.h"

namespace weft::data {
namespace {

enum class Class { kLetter, kNumber, kSpace, kOther };

Class ClassOf(char32_t c) {
  if (IsLetter(c)) return Class::kLetter;
  if (IsNumber(c)) return Class::kNumber;
  if (IsWhiteSpace(c)) return Class::kSpace;
  return Class::kOther;
}

}  // namespace

size_t Gpt2ChunkEnd(absl::string_view text, size_t pos) {
  const size_t n = text.size();
  // 's 't 're 've 'm 'll 'd (case-sensitive, as GPT-2's).
  if (text[pos] == '\'') {
    const absl::string_view rest = text.substr(pos + 1);
    for (absl::string_view s : {"s", "t", "re", "ve", "m", "ll", "d"}) {
      if (rest.substr(0, s.size()) == s) return pos + 1 + s.size();
    }
  }
  // ' ?' then a run of letters, of numbers, or of other symbols.
  size_t start = pos;
  if (text[pos] == ' ' && pos + 1 < n) ++start;
  CodePoint cp = DecodeUtf8(text, start);
  const Class run = ClassOf(cp.value);
  if (run != Class::kSpace) {
    size_t end = start + cp.length;
    while (end < n) {
      cp = DecodeUtf8(text, end);
      if (ClassOf(cp.value) != run) break;
      end += cp.length;
    }
    return end;
  }
  // White space: the whole run at the end of the text, or before a
  // non-space all but its last code point (which starts the next chunk);
  // a single space before a non-space is a chunk of its own.
  size_t end = pos, last = pos;
  while (end < n) {
    cp = DecodeUtf8(text, end);
    if (ClassOf(cp.value) != Class::kSpace) break;
    last = end;
    end += cp.length;
  }
  if (end == n || last == pos) return end;
  return last;
}

}  // namespace weft::data
