// Warp-level bf16 tensor-core helpers for the flash-attention kernels:
// mma.sync.m16n8k16 (f32 accumulate) and its fragment loads from shared
// memory (ldmatrix, plain and .trans), and the asynchronous tile copies
// (cp.async) that let the next tile load while this one is multiplied.
//
// Fragment layout (PTX ISA, "Matrix Fragments for mma.m16n8k16", bf16), with
// g = lane / 4 (group) and t = lane % 4 (thread in group):
//   A (16x16, row-major)  a[0] = A[g   ][2t..2t+1]   a[1] = A[g+8][2t..2t+1]
//                         a[2] = A[g   ][2t+8..+9]   a[3] = A[g+8][2t+8..+9]
//   B (16x8, k x n)       b[0] = B[2t..2t+1][g]      b[1] = B[2t+8..+9][g]
//   C/D (16x8, f32)       c[0..1] = C[g][2t..2t+1]   c[2..3] = C[g+8][2t..2t+1]
// Each 32-bit register holds two bf16 with the lower column (or k) in the low
// half. Consequence used throughout: the C fragments of two adjacent n-tiles
// (columns 0-7 and 8-15) repack, without shuffles, into the A fragment of a
// 16x16 tile: a = {pack(c0[0],c0[1]), pack(c0[2],c0[3]), pack(c1[0],c1[1]),
// pack(c1[2],c1[3])}. That is how P (and dS) feed the next product.
#ifndef WEFT_CORE_KERNELS_CUDA_ATTENTION_MMA_CUH_
#define WEFT_CORE_KERNELS_CUDA_ATTENTION_MMA_CUH_

#include <cuda_bf16.h>

#include <cstdint>

#include "core/kernels/cuda/common.cuh"

namespace weft::cuda {

// d += a · b for one 16x8x16 tile.
__device__ __forceinline__ void MmaBf16(float (&d)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  return *reinterpret_cast<uint32_t*>(&v);
}

// A fragment of the 16x16 tile at (row0, col0) of a row-major shared matrix
// with leading dimension ld (elements; a multiple of 8, so every row address
// is 16-byte aligned). One ldmatrix.x4: lanes 8i..8i+7 address the rows of
// 8x8 matrix i = a[i] (i & 1: lower 8 rows, i >> 1: right 8 columns).
__device__ __forceinline__ void LoadFragA(uint32_t (&a)[4], const __nv_bfloat16* s, int ld,
                                          int row0, int col0) {
  const int lane = threadIdx.x % 32;
  const int m = lane >> 3, r = lane & 7;
  const __nv_bfloat16* p = s + (row0 + r + (m & 1) * 8) * ld + col0 + (m >> 1) * 8;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(SharedAddress(p)));
}

// The same A fragment read from shared memory holding A transposed:
// s[k * ld + m] = A[m][k] (dQ = dS K from the dK/dV kernel's dS^T tile,
// stored a key per row). ldmatrix.x4.trans: lanes 8i..8i+7 address the
// stored rows (k) col0 + (i >> 1) * 8 + r at m offset row0 + (i & 1) * 8,
// and the transpose in flight hands each lane A's rows, as LoadFragA does.
__device__ __forceinline__ void LoadFragATrans(uint32_t (&a)[4], const __nv_bfloat16* s, int ld,
                                               int row0, int col0) {
  const int lane = threadIdx.x % 32;
  const int m = lane >> 3, r = lane & 7;
  const __nv_bfloat16* p = s + (col0 + (m >> 1) * 8 + r) * ld + row0 + (m & 1) * 8;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(SharedAddress(p)));
}

// B fragment of the 16x8 (k x n) tile with k in [k0, k0+16), n in [n0, n0+8),
// read from shared memory holding B transposed: s[n * ld + k] = B[k][n]. For
// S = Q K^T that is K itself (row per key). ldmatrix.x2: matrix 0 holds
// k0..k0+7, matrix 1 k0+8..k0+15 (lanes 16-31 repeat valid addresses).
__device__ __forceinline__ void LoadFragB(uint32_t (&b)[2], const __nv_bfloat16* s, int ld,
                                          int n0, int k0) {
  const int lane = threadIdx.x % 32;
  const int m = (lane >> 3) & 1, r = lane & 7;
  const __nv_bfloat16* p = s + (n0 + r) * ld + k0 + m * 8;
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(b[0]), "=r"(b[1])
               : "r"(SharedAddress(p)));
}

// The same B fragment read from B stored as is, row-major: s[k * ld + n] =
// B[k][n] (V for O = P V, K for dQ = dS K, Q and dO for dK and dV). The
// .trans form transposes each 8x8 matrix in flight, so no operand is ever
// stored transposed in shared memory.
__device__ __forceinline__ void LoadFragBTrans(uint32_t (&b)[2], const __nv_bfloat16* s, int ld,
                                               int k0, int n0) {
  const int lane = threadIdx.x % 32;
  const int m = (lane >> 3) & 1, r = lane & 7;
  const __nv_bfloat16* p = s + (k0 + m * 8 + r) * ld + n0;
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(b[0]), "=r"(b[1])
               : "r"(SharedAddress(p)));
}

// The A fragment for k-step kk (columns [16kk, 16kk+16)) of a 16-row matrix
// held as C fragments c[n-tile][4] (f32), rounded to bf16.
template <int N>
__device__ __forceinline__ void AccToFragA(uint32_t (&a)[4], const float (&c)[N][4], int kk) {
  a[0] = PackBf16(c[2 * kk][0], c[2 * kk][1]);
  a[1] = PackBf16(c[2 * kk][2], c[2 * kk][3]);
  a[2] = PackBf16(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = PackBf16(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

// Starts copying rows [row0, row0 + rows) of a (T, ld_global)-strided bf16
// head slice (cols [0, HS)) into the row-major shared tile s (s[r * ld + d])
// with 16-byte cp.async; rows at or past T are zero-filled. The caller
// commits (CpAsyncCommit) and waits (CpAsyncWait<N>) before reading s.
template <int HS>
__device__ __forceinline__ void LoadTileAsync(__nv_bfloat16* s, int ld, const __nv_bfloat16* g,
                                              int64_t ld_global, int row0, int rows, int T) {
  constexpr int kChunks = HS / 8;  // 16-byte chunks per row
  for (int idx = threadIdx.x; idx < rows * kChunks; idx += blockDim.x) {
    const int r = idx / kChunks;
    const int c = (idx % kChunks) * 8;
    const bool live = row0 + r < T;
    const __nv_bfloat16* src = g + int64_t(live ? row0 + r : 0) * ld_global + c;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                     SharedAddress(s + r * ld + c)),
                 "l"(src), "r"(live ? 16 : 0));
  }
}

// Double buffering: starts the next tile's copies when there is one
// (load_next issues and commits them) and waits until every group but that
// newest one has landed, i.e. the current tile.
template <typename LoadNext>
__device__ __forceinline__ void PrefetchNextWaitCurrent(bool has_next, LoadNext&& load_next) {
  if (has_next) {
    load_next();
    CpAsyncWait<1>();
  } else {
    CpAsyncWait<0>();
  }
}

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_ATTENTION_MMA_CUH_
