#include "data/gpt2_pretokenizer.h"

#include <climits>
#include <cstdint>

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

namespace {

bool IsNewline(char32_t c) { return c == '\r' || c == '\n'; }

// The end of the run of code points from `pos` for which `in` holds, and
// how many there were (at most `limit`).
template <typename In>
size_t RunEnd(absl::string_view text, size_t pos, In in, int limit = INT32_MAX) {
  int count = 0;
  while (pos < text.size() && count < limit) {
    const CodePoint cp = DecodeUtf8(text, pos);
    if (!in(cp.value)) break;
    pos += cp.length;
    ++count;
  }
  return pos;
}

}  // namespace

size_t Llama3ChunkEnd(absl::string_view text, size_t pos) {
  const size_t n = text.size();
  // Contractions, any case.
  if (text[pos] == '\'') {
    for (absl::string_view s : {"s", "t", "re", "ve", "m", "ll", "d"}) {
      if (pos + 1 + s.size() > n) continue;
      bool match = true;
      for (size_t i = 0; i < s.size(); ++i) {
        match = match && (text[pos + 1 + i] | 0x20) == s[i];
      }
      if (match) return pos + 1 + s.size();
    }
  }
  const CodePoint first = DecodeUtf8(text, pos);
  const char32_t c0 = first.value;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (IsLetter(c0)) return RunEnd(text, pos, IsLetter);
  if (!IsNewline(c0) && !IsNumber(c0) && pos + first.length < n &&
      IsLetter(DecodeUtf8(text, pos + first.length).value)) {
    return RunEnd(text, pos + first.length, IsLetter);
  }
  // \p{N}{1,3}
  if (IsNumber(c0)) return RunEnd(text, pos, IsNumber, 3);
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  const auto symbol = [](char32_t c) { return !IsWhiteSpace(c) && !IsLetter(c) && !IsNumber(c); };
  size_t start = pos;
  if (c0 == ' ' && pos + 1 < n) ++start;
  if (start < n && symbol(DecodeUtf8(text, start).value)) {
    return RunEnd(text, RunEnd(text, start, symbol), IsNewline);
  }
  // White space from here on: \s*[\r\n]+ ends after the run's last newline.
  const size_t end = RunEnd(text, pos, IsWhiteSpace);
  size_t after_newline = pos, last = pos;
  for (size_t p = pos; p < end;) {
    const CodePoint cp = DecodeUtf8(text, p);
    last = p;
    p += cp.length;
    if (IsNewline(cp.value)) after_newline = p;
  }
  if (after_newline > pos) return after_newline;
  // \s+(?!\S) then \s+, as GPT-2's.
  if (end == n || last == pos) return end;
  return last;
}

}  // namespace weft::data
