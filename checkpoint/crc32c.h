// CRC-32C (Castagnoli), the checksum every checkpoint piece carries.
//
// Uses the SSE4.2 crc32 instruction when the CPU has it (several GB/s, so
// checksumming does not slow saves down) and a table-driven fallback
// elsewhere; both give the same values (RFC 3720 test vectors in the test).
#ifndef WEFT_CHECKPOINT_CRC32C_H_
#define WEFT_CHECKPOINT_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace weft::ckpt {

// Extends `crc` (the value of an earlier call, or 0 to start) over `n` bytes.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

// The portable path, exposed so the test can compare it with the hardware one.
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n);

}  // namespace weft::ckpt

#endif  // WEFT_CHECKPOINT_CRC32C_H_
