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

// The 128-bit counter is (counter, counter_hi): dropout puts the sample's
// place in the global batch in the high half.
WEFT_HOST_DEVICE PhiloxOut Philox4x32(uint64_t counter, uint64_t seed, uint64_t counter_hi = 0) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
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

// A uniform float in [0, 1) from the top 24 bits of one Philox word.
WEFT_HOST_DEVICE float UniformFromBits(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

// Uniform float in [0, 1) for stream position `index` of stream `stream`:
// one Philox block serves four consecutive positions.
WEFT_HOST_DEVICE float PhiloxUniform(uint64_t seed, uint64_t index, uint64_t stream = 0) {
  return UniformFromBits(Philox4x32(index >> 2, seed, stream).v[index & 3]);
}

// Where a dropout launch's elements sit in the step's random numbers.
// Element i of the launch is element offset + i of a tensor whose first
// dimension holds samples of sample_size elements each (0: the whole
// tensor is one sample), and that tensor's sample b is sample
// first_sample + sample_stride * b of the step's global batch. Each
// element draws from (seed, its global sample, its place in the sample),
// so masks do not depend on how the global batch was split over ranks and
// micro-batches.
struct DropoutKey {
  uint64_t seed = 0;
  uint64_t offset = 0;
  uint64_t sample_size = 0;
  uint64_t first_sample = 0;
  uint64_t sample_stride = 1;
  // When set (device memory on CUDA), the value there is XORed into seed
  // when the kernel runs: the step's part of the seed, which a replayed
  // CUDA graph cannot take as an argument (see ResolvedSeed).
  const uint64_t* seed_in_memory = nullptr;
};

// The key's seed with its part in memory applied (on the device that
// memory is on).
WEFT_HOST_DEVICE uint64_t ResolvedSeed(const DropoutKey& k) {
  return k.seed_in_memory != nullptr ? k.seed ^ *k.seed_in_memory : k.seed;
}

// Dropout keeps element `within` of global sample `sample` when its
// uniform draw is >= p.
WEFT_HOST_DEVICE bool DropoutKeepAt(uint64_t seed, uint64_t sample, uint64_t within, float p) {
  return PhiloxUniform(seed, within, sample) >= p;
}

// Whether launch element i is kept (one division; loops over consecutive
// elements can step DropoutCursor instead). Reads seed_in_memory when set:
// kernels resolve the key once at entry (ResolvedSeed) and clear it.
WEFT_HOST_DEVICE bool DropoutKeep(const DropoutKey& k, uint64_t i, float p) {
  const uint64_t g = k.offset + i;
  const uint64_t seed = ResolvedSeed(k);
  if (k.sample_size == 0) return DropoutKeepAt(seed, k.first_sample, g, p);
  const uint64_t b = g / k.sample_size;
  return DropoutKeepAt(seed, k.first_sample + k.sample_stride * b, g - b * k.sample_size, p);
}

// Walks consecutive launch elements from i without a division per element,
// and with one Philox evaluation per four elements of a sample (a block
// serves four consecutive positions) instead of one per element. Keep
// returns exactly DropoutKeep's answer.
struct DropoutCursor {
  WEFT_HOST_DEVICE DropoutCursor(const DropoutKey& k, uint64_t i) : key(k) {
    key.seed = ResolvedSeed(k);  // the step's part, when in memory, read once
    key.seed_in_memory = nullptr;
    const uint64_t g = k.offset + i;
    const uint64_t b = k.sample_size == 0 ? 0 : g / k.sample_size;
    sample = k.first_sample + k.sample_stride * b;
    within = g - b * k.sample_size;
  }
  WEFT_HOST_DEVICE bool Keep(float p) {
    const uint64_t block = within >> 2;
    if (!cached || block != cached_block || sample != cached_sample) {
      draws = Philox4x32(block, key.seed, sample);
      cached = true;
      cached_block = block;
      cached_sample = sample;
    }
    return UniformFromBits(draws.v[within & 3]) >= p;
  }
  WEFT_HOST_DEVICE void Next() {
    if (++within == key.sample_size) {
      within = 0;
      sample += key.sample_stride;
    }
  }
  // Elements left in the current sample (all of them when the launch is
  // one sample).
  WEFT_HOST_DEVICE uint64_t LeftInSample() const {
    return key.sample_size == 0 ? ~uint64_t{0} : key.sample_size - within;
  }
  // Steps over n elements, at most LeftInSample().
  WEFT_HOST_DEVICE void Skip(uint64_t n) {
    within += n;
    if (within == key.sample_size) {
      within = 0;
      sample += key.sample_stride;
    }
  }
  DropoutKey key;
  uint64_t sample, within;
  // The last Philox block drawn, for the next elements of the same four.
  bool cached = false;
  uint64_t cached_block = 0, cached_sample = 0;
  PhiloxOut draws{};
};

}  // namespace weft

#endif  // WEFT_CORE_KERNELS_PHILOX_H_
