// FNV-1a, 64-bit: a hash that is the same on every rank, build and run
// (std::hash and absl::Hash may be seeded per process), for comparing what
// ranks hold and for tags they must agree on.
#ifndef WEFT_CORE_BASE_FNV1A_H_
#define WEFT_CORE_BASE_FNV1A_H_

#include <cstddef>
#include <cstdint>

namespace weft {

inline constexpr uint64_t kFnv1aBasis = 14695981039346656037ull;

// Continues `h` (kFnv1aBasis to start) over `n` bytes at `data`.
inline uint64_t Fnv1a(const void* data, size_t n, uint64_t h = kFnv1aBasis) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace weft

#endif  // WEFT_CORE_BASE_FNV1A_H_
