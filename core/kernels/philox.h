// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11): a counter-based generator, so element i's random number depends
// only on (seed, i) and not on threads, launch shape or device. Used by
// dropout on CPU and CUDA alike; both compile this header.
#ifndef WEFT_CORE_KERNELS_PHILOX_H_
#define WEFT_CORE_KERNELS_PHILOX_H_

#include <cstdint>

#if defined(__CUDACC__)
#define WEFT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define WEFT_HOST_DEVICE inline
#endif

namespace weft {

struct PhiloxOut {
  uint32_t v[4];
};

WEFT_HOST_DEVICE uint32_t PhiloxMulHi(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}

WEFT_HOST_DEVICE PhiloxOut Philox4x32(uint64_t counter, uint64_t seed) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint32_t lo0 = kM0 * c0, hi0 = PhiloxMulHi(kM0, c0);
    const uint32_t lo1 = kM1 * c2, hi1 = PhiloxMulHi(kM1, c2);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return PhiloxOut{{c0, c1, c2, c3}};
}

// Uniform float in [0, 1) for stream position `index` (24 random bits):
// one Philox block serves four consecutive positions.
WEFT_HOST_DEVICE float PhiloxUniform(uint64_t seed, uint64_t index) {
  const PhiloxOut r = Philox4x32(index >> 2, seed);
  return static_cast<float>(r.v[index & 3] >> 8) * (1.0f / 16777216.0f);
}

// Dropout keeps element `index` when its uniform draw is >= p.
WEFT_HOST_DEVICE bool DropoutKeep(uint64_t seed, uint64_t index, float p) {
  return PhiloxUniform(seed, index) >= p;
}

}  // namespace weft

#endif  // WEFT_CORE_KERNELS_PHILOX_H_
