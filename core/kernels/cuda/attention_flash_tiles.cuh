// The tile steps the flash kernels share (self-attention in
// attention_flash_{fwd,bwd}.cu, blockwise ring attention in
// attention_flash_block_{fwd,bwd}.cu): products of a warp's 16 rows with a
// shared-memory tile, and the forward's online softmax update. Each kernel
// keeps its own loads, masks and epilogue. Fragment layouts: see
// attention_mma.cuh.
#ifndef WEFT_CORE_KERNELS_CUDA_ATTENTION_FLASH_TILES_CUH_
#define WEFT_CORE_KERNELS_CUDA_ATTENTION_FLASH_TILES_CUH_

#include <cstdint>

#include "core/kernels/cuda/attention_mma.cuh"

namespace weft::cuda {

// Rows of a query or key tile in every flash kernel.
constexpr int kFlashTile = 64;

// Shared memory of the backward kernels, which own either 64 keys (the KV
// kernel: it loops over query steps) or kRows queries (the Q kernel: it
// loops over key tiles of 64). Rows are padded by 8 bf16 (16 B): conflict-free ldmatrix.
//
// Query rows per step of the KV kernel: 32 at HS = 128 keeps the dK and dV
// accumulators plus two S-sized tiles within the register file.
template <int HS>
constexpr int KvStepRows() {
  return HS >= 128 ? 32 : 64;
}

template <int HS>
struct KvSmem {
  static constexpr int kBr = KvStepRows<HS>();
  static constexpr int kLd = HS + 8;
  static constexpr int kK = kFlashTile * kLd;  // K and V of the block, row-major
  static constexpr int kQ = kBr * kLd;         // Q or dO of one step, row-major
  // K, V, then two stages of (Q, dO) and of (lse, D): the next step's tiles
  // load while this step's are used.
  static constexpr int kBytes = (2 * kK + 4 * kQ) * 2 + 4 * kBr * 4;
};

template <int HS, int kRows>
struct QSmem {
  static constexpr int kLd = HS + 8;
  static constexpr int kQ = kRows * kLd;          // Q or dO of the block, row-major
  static constexpr int kKv = kFlashTile * kLd;    // one K or V tile, row-major
  // Q, dO, then two stages of (K, V).
  static constexpr int kBytes = (2 * kQ + 4 * kKv) * 2;
};

// x = A1 · B1^T and y = A2 · B2^T for the warp's 16 rows (starting at
// a_row of A1 and A2) against the kCols rows of B1 and B2, all row-major in
// shared memory with HS columns: the S and dP tiles of the backward.
template <int HS, int kCols>
__device__ __forceinline__ void DualTileProduct(float (&x)[kCols / 8][4], float (&y)[kCols / 8][4],
                                                const __nv_bfloat16* a1, const __nv_bfloat16* a2,
                                                int lda, int a_row, const __nv_bfloat16* b1,
                                                const __nv_bfloat16* b2, int ldb) {
#pragma unroll
  for (int j = 0; j < kCols / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) x[j][e] = y[j][e] = 0.0f;
  }
#pragma unroll
  for (int kk = 0; kk < HS / 16; ++kk) {
    uint32_t f1[4], f2[4];
    LoadFragA(f1, a1, lda, a_row, kk * 16);
    LoadFragA(f2, a2, lda, a_row, kk * 16);
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
      uint32_t bf[2];
      LoadFragB(bf, b1, ldb, j * 8, kk * 16);
      MmaBf16(x[j], f1, bf);
      LoadFragB(bf, b2, ldb, j * 8, kk * 16);
      MmaBf16(y[j], f2, bf);
    }
  }
}

// s[m] = Q_m · K^T for the warp's kM 16-row query tiles (resident Q
// fragments qf[m]) against the kCols keys of the row-major K tile k_s: the
// forward's score tiles. Each K fragment is loaded once for all kM tiles, so
// kM = 2 halves the shared-memory reads per product.
template <int HS, int kCols, int kM>
__device__ __forceinline__ void ScoreTiles(float (&s)[kM][kCols / 8][4],
                                           const uint32_t (&qf)[kM][HS / 16][4],
                                           const __nv_bfloat16* k_s, int ld) {
#pragma unroll
  for (int m = 0; m < kM; ++m) {
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) s[m][j][0] = s[m][j][1] = s[m][j][2] = s[m][j][3] = 0.0f;
  }
#pragma unroll
  for (int kk = 0; kk < HS / 16; ++kk) {
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
      uint32_t bf[2];
      LoadFragB(bf, k_s, ld, j * 8, kk * 16);
#pragma unroll
      for (int m = 0; m < kM; ++m) MmaBf16(s[m][j], qf[m][kk], bf);
    }
  }
}

// ScoreTiles for one 16-row tile.
template <int HS, int kCols>
__device__ __forceinline__ void ScoreTile(float (&s)[kCols / 8][4],
                                          const uint32_t (&qf)[HS / 16][4],
                                          const __nv_bfloat16* k_s, int ld) {
  ScoreTiles<HS, kCols, 1>(reinterpret_cast<float (&)[1][kCols / 8][4]>(s),
                           reinterpret_cast<const uint32_t (&)[1][HS / 16][4]>(qf), k_s, ld);
}

// c[m] += A_m · B for the warp's kM 16-row tiles, A_m a 16 x kK tile held
// as accumulators (rounded to bf16) and B the row-major kK x HS tile b_s:
// O += P V, dQ += dS K. Each B fragment is loaded once for all kM tiles.
template <int HS, int kK, int kM>
__device__ __forceinline__ void AccumulateProducts(float (&c)[kM][HS / 8][4],
                                                   const float (&a)[kM][kK / 8][4],
                                                   const __nv_bfloat16* b_s, int ld) {
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    uint32_t af[kM][4];
#pragma unroll
    for (int m = 0; m < kM; ++m) AccToFragA(af[m], a[m], kk);
#pragma unroll
    for (int n = 0; n < HS / 8; ++n) {
      uint32_t bf[2];
      LoadFragBTrans(bf, b_s, ld, kk * 16, n * 8);
#pragma unroll
      for (int m = 0; m < kM; ++m) MmaBf16(c[m][n], af[m], bf);
    }
  }
}

// AccumulateProducts for one 16-row tile.
template <int HS, int kK>
__device__ __forceinline__ void AccumulateProduct(float (&c)[HS / 8][4],
                                                  const float (&a)[kK / 8][4],
                                                  const __nv_bfloat16* b_s, int ld) {
  AccumulateProducts<HS, kK, 1>(reinterpret_cast<float (&)[1][HS / 8][4]>(c),
                                reinterpret_cast<const float (&)[1][kK / 8][4]>(a), b_s, ld);
}

// c1 += A1 · B1 and c2 += A2 · B2 in one pass over k (dV += P^T dO and
// dK += dS^T Q).
template <int HS, int kK>
__device__ __forceinline__ void AccumulateDualProduct(float (&c1)[HS / 8][4],
                                                      const float (&a1)[kK / 8][4],
                                                      const __nv_bfloat16* b1,
                                                      float (&c2)[HS / 8][4],
                                                      const float (&a2)[kK / 8][4],
                                                      const __nv_bfloat16* b2, int ld) {
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    uint32_t f1[4], f2[4];
    AccToFragA(f1, a1, kk);
    AccToFragA(f2, a2, kk);
#pragma unroll
    for (int n = 0; n < HS / 8; ++n) {
      uint32_t bf[2];
      LoadFragBTrans(bf, b1, ld, kk * 16, n * 8);
      MmaBf16(c1[n], f1, bf);
      LoadFragBTrans(bf, b2, ld, kk * 16, n * 8);
      MmaBf16(c2[n], f2, bf);
    }
  }
}

// One key tile of the forward's online softmax, for the thread's two rows
// (accumulator elements 0-1 and 2-3): s holds the scaled, masked scores in
// log2 units and becomes P; the running max m and this thread's share of
// the running sum l are updated, and alpha0 / alpha1 are the factors the
// rows' output accumulators must be scaled by (0 on the first tile). A row
// that has seen no key keeps m = -inf: its scores are exponentiated
// against 0, so -inf gives 0 rather than NaN.
template <int kCols>
__device__ __forceinline__ void OnlineSoftmaxScores(float (&s)[kCols / 8][4], float& m0,
                                                    float& m1, float& l0, float& l1,
                                                    float& alpha0, float& alpha1) {
  float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
  for (int j = 0; j < kCols / 8; ++j) {
    mx0 = fmaxf(mx0, fmaxf(s[j][0], s[j][1]));
    mx1 = fmaxf(mx1, fmaxf(s[j][2], s[j][3]));
  }
  // The four lanes of a group share rows: reduce over them.
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
  const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
  const float base0 = mn0 == -INFINITY ? 0.0f : mn0;
  const float base1 = mn1 == -INFINITY ? 0.0f : mn1;
  alpha0 = exp2f(m0 - base0);  // 0 on the first tile
  alpha1 = exp2f(m1 - base1);
  m0 = mn0;
  m1 = mn1;
  float rs0 = 0.0f, rs1 = 0.0f;
#pragma unroll
  for (int j = 0; j < kCols / 8; ++j) {
    s[j][0] = exp2f(s[j][0] - base0);
    s[j][1] = exp2f(s[j][1] - base0);
    s[j][2] = exp2f(s[j][2] - base1);
    s[j][3] = exp2f(s[j][3] - base1);
    rs0 += s[j][0] + s[j][1];
    rs1 += s[j][2] + s[j][3];
  }
  l0 = l0 * alpha0 + rs0;
  l1 = l1 * alpha1 + rs1;
}

// o's first-row elements times alpha0, second-row elements times alpha1.
template <int HS>
__device__ __forceinline__ void ScaleRows(float (&o)[HS / 8][4], float alpha0, float alpha1) {
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) {
    o[n][0] *= alpha0;
    o[n][1] *= alpha0;
    o[n][2] *= alpha1;
    o[n][3] *= alpha1;
  }
}

// OnlineSoftmaxScores with the output accumulators o rescaled at once.
template <int HS, int kCols>
__device__ __forceinline__ void OnlineSoftmaxStep(float (&s)[kCols / 8][4], float& m0, float& m1,
                                                  float& l0, float& l1, float (&o)[HS / 8][4]) {
  float alpha0, alpha1;
  OnlineSoftmaxScores<kCols>(s, m0, m1, l0, l1, alpha0, alpha1);
  ScaleRows<HS>(o, alpha0, alpha1);
}

// The elementwise steps below work on a warp's 16-row accumulator tile
// (rows row0 = 16w + g and row0 + 8 for the thread, elements 0-1 and 2-3 of
// each 8-column slice j, columns 8j + 2t and + 1; attention_mma.cuh). Which
// (row, column) pairs are live comes from `live(col, live0, live1)`: col is
// the column within the tile, live0 / live1 whether the thread's first /
// second row sees it (causal by index in self-attention, by global position
// in the ring kernels).

// A forward score tile into log2 units: s *= scale_log2, -inf where not live.
template <int kCols, typename Live>
__device__ __forceinline__ void ScaleAndMaskScores(float (&s)[kCols / 8][4], float scale_log2,
                                                   Live live) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int j = 0; j < kCols / 8; ++j) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      bool live0, live1;
      live(j * 8 + 2 * t + c, live0, live1);
      float v0 = s[j][c] * scale_log2, v1 = s[j][2 + c] * scale_log2;
      if (!live0) v0 = -INFINITY;
      if (!live1) v1 = -INFINITY;
      s[j][c] = v0;
      s[j][2 + c] = v1;
    }
  }
}

// The same with the causal mask by index: where `masked`, keys (k0 +
// column) above the row are -inf.
template <int kCols>
__device__ __forceinline__ void ScaleAndMaskScores(float (&s)[kCols / 8][4], int row0, int k0,
                                                   bool masked, float scale_log2) {
  ScaleAndMaskScores<kCols>(s, scale_log2, [&](int col, bool& live0, bool& live1) {
    const int key = k0 + col;
    live0 = !(masked && key > row0);
    live1 = !(masked && key > row0 + 8);
  });
}

// A dK/dV kernel's step, keys as rows, the step's queries as columns: p
// (S^T) becomes P^T = exp2(S^T * scale_log2 - lse) where live (0
// elsewhere) and ds (dP^T) becomes dS^T = P^T * (dP^T - D); lse_s (log2
// units) and d_s hold the step's per-query statistics.
template <int kCols, typename Live>
__device__ __forceinline__ void KvStepGradients(float (&p)[kCols / 8][4], float (&ds)[kCols / 8][4],
                                                const float* lse_s, const float* d_s,
                                                float scale_log2, Live live) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int j = 0; j < kCols / 8; ++j) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int qi = j * 8 + 2 * t + c;  // query within the step
      bool live0, live1;
      live(qi, live0, live1);
      const float p0 = live0 ? exp2f(p[j][c] * scale_log2 - lse_s[qi]) : 0.0f;
      const float p1 = live1 ? exp2f(p[j][2 + c] * scale_log2 - lse_s[qi]) : 0.0f;
      p[j][c] = p0;
      p[j][2 + c] = p1;
      ds[j][c] = p0 * (ds[j][c] - d_s[qi]);
      ds[j][2 + c] = p1 * (ds[j][2 + c] - d_s[qi]);
    }
  }
}

// The same for self-attention: the thread's keys key0, key0 + 8 see the
// step's queries q0 + column at or after them and before T.
template <int kCols>
__device__ __forceinline__ void KvStepGradients(float (&p)[kCols / 8][4], float (&ds)[kCols / 8][4],
                                                int key0, int q0, int T, const float* lse_s,
                                                const float* d_s, float scale_log2) {
  KvStepGradients<kCols>(p, ds, lse_s, d_s, scale_log2, [&](int qi, bool& live0, bool& live1) {
    const int query = q0 + qi;
    live0 = query >= key0 && query < T;
    live1 = query >= key0 + 8 && query < T;
  });
}

// A dQ kernel's key tile, queries as rows (lse in log2 units and D of each
// of the thread's two), keys as columns: ds (dP) becomes
// dS = exp2(S * scale_log2 - lse) * (dP - D) where live (0 elsewhere), s
// holding S.
template <int kCols, typename Live>
__device__ __forceinline__ void QTileGradients(const float (&s)[kCols / 8][4],
                                               float (&ds)[kCols / 8][4], float lse0, float lse1,
                                               float d0, float d1, float scale_log2, Live live) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int j = 0; j < kCols / 8; ++j) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      bool live0, live1;
      live(j * 8 + 2 * t + c, live0, live1);
      const float p0 = live0 ? exp2f(s[j][c] * scale_log2 - lse0) : 0.0f;
      const float p1 = live1 ? exp2f(s[j][2 + c] * scale_log2 - lse1) : 0.0f;
      ds[j][c] = p0 * (ds[j][c] - d0);
      ds[j][2 + c] = p1 * (ds[j][2 + c] - d1);
    }
  }
}

// The same for self-attention: rows row0, row0 + 8 below T see keys (k0 +
// column) at or before them.
template <int kCols>
__device__ __forceinline__ void QTileGradients(const float (&s)[kCols / 8][4],
                                               float (&ds)[kCols / 8][4], int row0, int k0, int T,
                                               float lse0, float lse1, float d0, float d1,
                                               float scale_log2) {
  QTileGradients<kCols>(s, ds, lse0, lse1, d0, d1, scale_log2,
                        [&](int col, bool& live0, bool& live1) {
                          const int key = k0 + col;
                          live0 = key <= row0 && row0 < T;
                          live1 = key <= row0 + 8 && row0 + 8 < T;
                        });
}

// Writes the natural-log logsumexp of the thread's two rows (lane t == 0 of
// each group; l summed over the group): ln 2 * (m + log2 l) from the
// forward's running max and sum in log2 units, for rows below T.
__device__ __forceinline__ void StoreRowLse(float* lse_row, int row0, int T, float m0, float m1,
                                            float l0, float l1) {
  constexpr float kLn2 = 0.6931471805599453f;
  if ((threadIdx.x & 3) != 0) return;
  if (row0 < T) lse_row[row0] = (m0 + log2f(l0)) * kLn2;
  if (row0 + 8 < T) lse_row[row0 + 8] = (m1 + log2f(l1)) * kLn2;
}

// Stores the thread's two rows of a 16 x N accumulator tile as bf16: at p0
// (the thread's first column, 2t, of row row0) times s0 when live0, and at
// p0 + row_stride (row0 + 8) times s1 when live1.
template <int N>
__device__ __forceinline__ void StoreTileRows(__nv_bfloat16* p0, int64_t row_stride, bool live0,
                                              bool live1, const float (&c)[N / 8][4], float s0,
                                              float s1) {
#pragma unroll
  for (int n = 0; n < N / 8; ++n) {
    if (live0) {
      *reinterpret_cast<uint32_t*>(p0 + n * 8) = PackBf16(c[n][0] * s0, c[n][1] * s0);
    }
    if (live1) {
      *reinterpret_cast<uint32_t*>(p0 + row_stride + n * 8) = PackBf16(c[n][2] * s1, c[n][3] * s1);
    }
  }
}

// Sums a thread's share of a row over the four lanes of its group.
__device__ __forceinline__ float GroupSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_ATTENTION_FLASH_TILES_CUH_
