// Dropout over whole Philox blocks with AVX2: eight Philox4x32-10 blocks
// (32 consecutive elements of one sample) per iteration, lane-parallel,
// instead of one scalar evaluation per four elements. Bitwise the mask and
// values of DropoutCursor's scalar loop (philox.h). Internal to
// //core/kernels/cpu.
#ifndef WEFT_CORE_KERNELS_CPU_DROPOUT_AVX2_H_
#define WEFT_CORE_KERNELS_CPU_DROPOUT_AVX2_H_

#include <cstdint>

namespace weft::cpu {

// Whether this CPU runs DropoutBlocksAvx2 (checked once).
bool HasAvx2();

// out[i] = in[i] * scale if the element's draw is >= p, else 0, for the
// n elements (a multiple of 32) of sample `sample` that start at Philox
// block `first_block` (place in the sample 4 * first_block). Requires
// HasAvx2().
void DropoutBlocksAvx2(float* out, const float* in, int64_t n, uint64_t first_block,
                       uint64_t seed, uint64_t sample, float p, float scale);

}  // namespace weft::cpu

#endif  // WEFT_CORE_KERNELS_CPU_DROPOUT_AVX2_H_
