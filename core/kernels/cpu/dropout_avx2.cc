#include "core/kernels/cpu/dropout_avx2.h"

#include <immintrin.h>

namespace weft::cpu {
namespace {

#define WEFT_AVX2 __attribute__((target("avx2")))

// 32x32 -> 64-bit products of eight lanes: AVX2 multiplies only the even
// lanes, so the odd ones are shifted down, multiplied, and blended back.
WEFT_AVX2 inline void MulHiLo(__m256i a, __m256i m, __m256i* hi, __m256i* lo) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

// Philox4x32-10 of blocks first_block .. first_block + 7 (lane j holds
// block first_block + j), returned as 32 words in element order: out[q]
// holds blocks 2q and 2q + 1, four words each.
WEFT_AVX2 inline void PhiloxBlocks8(uint64_t first_block, uint64_t seed, uint64_t stream,
                                    __m256i out[4]) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  const __m256i base_lo = _mm256_set1_epi32(static_cast<int>(first_block));
  __m256i c0 = _mm256_add_epi32(base_lo, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  // A lane whose low word wrapped carries one into the high word: unsigned
  // c0 < base_lo, compared as signed after flipping the sign bits.
  const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i wrapped =
      _mm256_cmpgt_epi32(_mm256_xor_si256(base_lo, sign), _mm256_xor_si256(c0, sign));
  __m256i c1 = _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int>(first_block >> 32)), wrapped);
  __m256i c2 = _mm256_set1_epi32(static_cast<int>(stream));
  __m256i c3 = _mm256_set1_epi32(static_cast<int>(stream >> 32));
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    __m256i hi0, lo0, hi1, lo1;
    MulHiLo(c0, m0, &hi0, &lo0);
    MulHiLo(c2, m1, &hi1, &lo1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c1 = lo1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // Transpose the four word vectors into block order (a 4 x 8 transpose:
  // within each 128-bit half, then across the halves).
  const __m256i w01_lo = _mm256_unpacklo_epi32(c0, c1), w01_hi = _mm256_unpackhi_epi32(c0, c1);
  const __m256i w23_lo = _mm256_unpacklo_epi32(c2, c3), w23_hi = _mm256_unpackhi_epi32(c2, c3);
  const __m256i b04 = _mm256_unpacklo_epi64(w01_lo, w23_lo), b15 = _mm256_unpackhi_epi64(w01_lo, w23_lo);
  const __m256i b26 = _mm256_unpacklo_epi64(w01_hi, w23_hi), b37 = _mm256_unpackhi_epi64(w01_hi, w23_hi);
  out[0] = _mm256_permute2x128_si256(b04, b15, 0x20);
  out[1] = _mm256_permute2x128_si256(b26, b37, 0x20);
  out[2] = _mm256_permute2x128_si256(b04, b15, 0x31);
  out[3] = _mm256_permute2x128_si256(b26, b37, 0x31);
}

}  // namespace

bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

WEFT_AVX2 void DropoutBlocksAvx2(float* out, const float* in, int64_t n, uint64_t first_block,
                                 uint64_t seed, uint64_t sample, float p, float scale) {
  // The same float operations as UniformFromBits and the scalar loop (no
  // FMA), so the values are bitwise the scalar kernel's.
  const __m256 vp = _mm256_set1_ps(p), vscale = _mm256_set1_ps(scale);
  const __m256 unit = _mm256_set1_ps(1.0f / 16777216.0f);
  __m256i words[4];
  for (int64_t i = 0; i < n; i += 32, first_block += 8) {
    PhiloxBlocks8(first_block, seed, sample, words);
    for (int q = 0; q < 4; ++q) {
      const __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(words[q], 8)), unit);
      const __m256 keep = _mm256_cmp_ps(u, vp, _CMP_GE_OQ);
      const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(in + i + 8 * q), vscale);
      _mm256_storeu_ps(out + i + 8 * q, _mm256_and_ps(keep, x));
    }
  }
}

}  // namespace weft::cpu
