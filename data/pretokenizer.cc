#include "data/pretokenizer.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace weft::data {
namespace {

enum ByteClass : uint8_t { kSpace, kLetter, kDigit, kOther };

constexpr std::array<uint8_t, 256> MakeClassTable() {
  std::array<uint8_t, 256> t{};
  for (int b = 0; b < 256; ++b) {
    if (b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f') {
      t[b] = kSpace;
    } else if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b >= 0x80) {
      t[b] = kLetter;
    } else if (b >= '0' && b <= '9') {
      t[b] = kDigit;
    } else {
      t[b] = kOther;
    }
  }
  return t;
}

constexpr std::array<uint8_t, 256> kClass = MakeClassTable();

inline uint8_t ClassOf(char c) { return kClass[static_cast<uint8_t>(c)]; }

// End of the run of bytes of `cls` starting at `pos`.
size_t RunEnd(absl::string_view text, size_t pos, uint8_t cls) {
  while (pos < text.size() && ClassOf(text[pos]) == cls) ++pos;
  return pos;
}

}  // namespace

size_t ChunkEnd(absl::string_view text, size_t pos) {
  const size_t n = text.size();
  const size_t limit = std::min(n, pos + kMaxChunkBytes);
  const uint8_t cls = ClassOf(text[pos]);
  if (cls != kSpace) return std::min(limit, RunEnd(text, pos, cls));
  const size_t end = RunEnd(text, pos, kSpace);
  if (end == n) return limit;  // trailing whitespace
  if (end - pos == 1 && text[pos] == ' ') {
    // " word": the space leads the run that follows.
    return std::min(limit, RunEnd(text, pos + 1, ClassOf(text[pos + 1])));
  }
  // Leave a final ' ' to lead the next run.
  const size_t cut = text[end - 1] == ' ' ? end - 1 : end;
  return std::min(limit, cut);
}

size_t SafeSplitPoint(absl::string_view text, size_t at_least) {
  size_t p = std::max<size_t>(at_least, 1);
  for (; p < text.size(); ++p) {
    if (ClassOf(text[p]) == kSpace && ClassOf(text[p - 1]) != kSpace) return p;
  }
  return text.size();
}

}  // namespace weft::data
