// Bytes as lowercase hex text and back: how weft's own tokenizer files
// (gpt2_tokenizer.h, llmc_tokenizer.h) keep token bytes on text lines.
#ifndef WEFT_DATA_HEX_TEXT_H_
#define WEFT_DATA_HEX_TEXT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace weft::data {

inline std::string ToHex(absl::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (const char c : bytes) {
    out.push_back(kDigits[static_cast<unsigned char>(c) >> 4]);
    out.push_back(kDigits[static_cast<unsigned char>(c) & 15]);
  }
  return out;
}

// False for an odd length or a character that is not a lowercase hex digit.
inline bool FromHex(absl::string_view hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  const auto digit = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

}  // namespace weft::data

#endif  // WEFT_DATA_HEX_TEXT_H_
