// Hopper (sm_90a) warpgroup tensor-core helpers: wgmma.mma_async with the A
// operand in registers and B in shared memory, the "core matrix" layout B
// must have, and the fences around it.
//
// A warpgroup is 4 consecutive warps (warp w of the group owns rows
// [16w, 16w + 16) of the 64-row tile). Per warp, the A fragment (16 x 16,
// bf16) and each 8-column slice of the f32 accumulator D (64 x N) have the
// mma.m16n8k16 layouts of attention_mma.cuh: d[j][0..1] = D[g][8j + 2t..+1],
// d[j][2..3] = D[g + 8][8j + 2t..+1]. So accumulators repack into A
// fragments exactly as with mma.sync (AccToFragA).
//
// B (K x N, here always K = 16 per instruction) is read by the tensor cores
// straight from shared memory, described by a 64-bit descriptor. We use the
// K-major layout without swizzling: B is stored as "core matrices" of 8 rows
// (n) x 8 bf16 (k), each 128 contiguous bytes (row n % 8 at byte 16 (n % 8)).
// The descriptor holds the start address, the byte offset between the two
// core matrices adjacent in K (LBO) and between core matrices adjacent in N
// (SBO). CoreLayoutOffset below is the one layout every wgmma operand of
// ours uses: an R x K operand (R = N rows) with core matrix (r / 8, k / 8) at
// ((r / 8) * (K / 8) + k / 8) * 128 bytes, so LBO = 128, SBO = K * 16, and
// k-step kk starts 2 * kk core matrices (256 bytes) in. This is the PTX
// ISA's canonical K-major layout without swizzling, in elements (T = 8
// bf16 per 16 bytes): offset(r, k) = (r % 8) T + (r / 8) SBO + k % T +
// (k / T) LBO within one k-step.
//
// Ordering: shared memory written by ordinary stores or cp.async must be
// made visible to the tensor cores' (async proxy) reads by
// FenceProxyAsync() in the writing threads, then a barrier; registers
// written before a wgmma (A fragments, accumulators) need WgmmaFence(); a
// product's results may be read once a WgmmaWait<n>() has retired its
// commit group (WgmmaCommit()). The fences and waits are asm statements
// with no register operands, so the compiler could move register
// arithmetic across them: WgmmaPin() ties the registers to that point
// (pin before a fence what was just written, after a wait what is read).
#ifndef WEFT_CORE_KERNELS_CUDA_WGMMA_CUH_
#define WEFT_CORE_KERNELS_CUDA_WGMMA_CUH_

#include <cstdint>

#include "core/kernels/cuda/attention_mma.cuh"

namespace weft::cuda {

// Byte offset of element (r, k) of an R x K bf16 operand in the core-matrix
// layout (K a multiple of 8).
template <int K>
__device__ __forceinline__ int CoreLayoutOffset(int r, int k) {
  return ((r >> 3) * (K / 8) + (k >> 3)) * 128 + (r & 7) * 16 + (k & 7) * 2;
}

// Descriptor of k-step kk (columns [16kk, 16kk + 16)) of an R x K operand in
// the core-matrix layout at s: start address, LBO, SBO (each in 16-byte
// units, 14 bits), no swizzling (bits 62-63 zero), base offset 0.
template <int K>
__device__ __forceinline__ uint64_t CoreLayoutDescriptor(const void* s, int kk) {
  const uint32_t start = SharedAddress(s) + kk * 256;
  constexpr uint32_t kLbo = 128, kSbo = K * 16;
  return uint64_t((start & 0x3FFFF) >> 4) | uint64_t(kLbo >> 4) << 16 |
         uint64_t(kSbo >> 4) << 32;
}

// Descriptor of k-step kk of a K x N operand B stored by its rows (k) in the
// core-matrix layout at s, i.e. loaded as an R = K rows x N columns tile:
// with the instruction's B transposed (N-major), PTX's canonical N-major
// layout without swizzling is offset(n, k) = n % 8 + (n / 8) SBO +
// (k % 8) 8 + (k / 8) LBO elements, so SBO = 128 bytes (the next 8
// columns) and LBO = N * 16 (the next 8 rows); k-step kk starts 2 kk row
// groups in. Not yet run on a GPU (wgmma_test's N-major case decides).
template <int N>
__device__ __forceinline__ uint64_t CoreLayoutDescriptorNMajor(const void* s, int kk) {
  const uint32_t start = SharedAddress(s) + kk * 2 * N * 16;
  constexpr uint32_t kLbo = N * 16, kSbo = 128;
  return uint64_t((start & 0x3FFFF) >> 4) | uint64_t(kLbo >> 4) << 16 |
         uint64_t(kSbo >> 4) << 32;
}

// Starts copying rows [row0, row0 + rows) of a (T, ld_global)-strided bf16
// head slice (K columns) into the core-matrix layout at s with 16-byte
// cp.async (rows at or past T zero-filled). Consecutive threads take the 8
// rows of one core matrix, so each group of 8 writes 128 contiguous bytes.
template <int K>
__device__ __forceinline__ void LoadCoreTileAsync(__nv_bfloat16* s, const __nv_bfloat16* g,
                                                  int64_t ld_global, int row0, int rows, int T) {
  constexpr int kChunks = K / 8;  // 16-byte chunks per row = core matrices per 8 rows
  unsigned char* base = reinterpret_cast<unsigned char*>(s);
  for (int idx = threadIdx.x; idx < rows * kChunks; idx += blockDim.x) {
    const int r = (idx & 7) + ((idx >> 3) / kChunks) * 8;
    const int c = (idx >> 3) % kChunks;
    const bool live = row0 + r < T;
    const __nv_bfloat16* src = g + int64_t(live ? row0 + r : 0) * ld_global + c * 8;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                     SharedAddress(base + CoreLayoutOffset<K>(r, c * 8))),
                 "l"(src), "r"(live ? 16 : 0));
  }
}

// Writes the transpose of the kRows x kCols tile src into the core-matrix
// layout at dst as a kCols x kRows operand: dst(c, r) = src(r, c). src is
// row-major with leading dimension ld (a multiple of 8), or with kFromCore
// itself in the core-matrix layout (as a kRows x kCols operand; ld unused).
// Each warp moves four 8x8 blocks per ldmatrix.x4.trans; a lane's word (two
// rows of one column) is one 4-byte store, 32 lanes filling one 128-byte
// core matrix per block.
template <int kRows, int kCols, bool kFromCore = false>
__device__ __forceinline__ void TransposeToCoreLayout(__nv_bfloat16* dst, const __nv_bfloat16* src,
                                                      int ld) {
  constexpr int kBlocks = (kRows / 8) * (kCols / 8);
  static_assert(kBlocks % 4 == 0, "ldmatrix.x4 moves 4 blocks");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  unsigned char* base = reinterpret_cast<unsigned char*>(dst);
  for (int b0 = warp * 4; b0 < kBlocks; b0 += warps * 4) {
    // Lane 8i + j addresses row j of block b0 + i (rb = block / (kCols / 8)).
    const int mine = b0 + (lane >> 3);
    const int rb = mine / (kCols / 8), cb = mine % (kCols / 8);
    const int r = rb * 8 + (lane & 7);
    const auto* src_bytes = reinterpret_cast<const unsigned char*>(src);
    const __nv_bfloat16* p =
        kFromCore ? reinterpret_cast<const __nv_bfloat16*>(src_bytes +
                                                           CoreLayoutOffset<kCols>(r, cb * 8))
                  : src + r * ld + cb * 8;
    uint32_t w[4];
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "r"(SharedAddress(p)));
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // w[i]: src rows rb*8 + 2(lane % 4), +1 of column cb*8 + lane / 4, i.e.
      // dst row cb*8 + lane / 4, columns rb*8 + 2(lane % 4), +1.
      const int blk = b0 + i;
      const int brb = blk / (kCols / 8), bcb = blk % (kCols / 8);
      const int offset = CoreLayoutOffset<kRows>(bcb * 8 + (lane >> 2), brb * 8 + 2 * (lane & 3));
      *reinterpret_cast<uint32_t*>(base + offset) = w[i];
    }
  }
}

// An empty asm that "modifies" every register of x: writes before it stay
// before, reads after it stay after (it is ordered with the other volatile
// asm: the fences, the products and the waits).
template <int N>
__device__ __forceinline__ void WgmmaPin(float (&x)[N][4]) {
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(x[j][e])::"memory");
  }
}
template <int N>
__device__ __forceinline__ void WgmmaPin(uint32_t (&x)[N][4]) {
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(x[j][e])::"memory");
  }
}

// Makes this thread's shared-memory writes (stores, landed cp.async)
// visible to later wgmma reads; a barrier must follow before the wgmma.
__device__ __forceinline__ void FenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Orders register writes (A fragments, accumulators) before the next wgmma.
__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Waits until at most kPending committed wgmma groups are in flight.
template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// d += A · B for the warpgroup's 64 x N tile: a is this warp's A fragment
// (its 16 rows x 16 k), desc_b the descriptor of B's 16 x N k-step, K-major
// (kTransB = 0: CoreLayoutDescriptor) or N-major (kTransB = 1, B given as
// its K x N rows: CoreLayoutDescriptorNMajor). Issued by all 128 threads of
// the warpgroup; asynchronous until WgmmaWait.
template <int N>
struct Wgmma;

template <>
struct Wgmma<32> {
  template <int kTransB>
  static __device__ __forceinline__ void Run(float (&d)[32 / 8][4], const uint32_t (&a)[4],
                                             uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
        "}, {%16, %17, %18, %19}, %20, p, 1, 1, %22;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
          "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
          "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
          "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1), "n"(kTransB));
  }
};

template <>
struct Wgmma<64> {
  template <int kTransB>
  static __device__ __forceinline__ void Run(float (&d)[64 / 8][4], const uint32_t (&a)[4],
                                             uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
          "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
          "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
          "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
          "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
          "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
          "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1), "n"(kTransB));
  }
};

template <>
struct Wgmma<128> {
  template <int kTransB>
  static __device__ __forceinline__ void Run(float (&d)[128 / 8][4], const uint32_t (&a)[4],
                                             uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
          "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
          "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
          "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
          "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
          "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
          "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]),
          "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),
          "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
          "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]),
          "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),
          "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]),
          "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]),
          "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),
          "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1), "n"(kTransB));
  }
};

template <int N, int kTransB = 0>
__device__ __forceinline__ void WgmmaBf16(float (&d)[N / 8][4], const uint32_t (&a)[4],
                                          uint64_t desc_b) {
  Wgmma<N>::template Run<kTransB>(d, a, desc_b);
}

// x += A · B over K, issued only: A the warp's A fragments (16 rows x K,
// one per k-step), B an N x K tile in the core-matrix layout. The caller
// fences registers before (WgmmaFence), commits and waits.
template <int N, int K>
__device__ __forceinline__ void WgmmaIssueProduct(float (&x)[N / 8][4],
                                                  const uint32_t (&a)[K / 16][4],
                                                  const __nv_bfloat16* b) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) WgmmaBf16<N>(x, a[kk], CoreLayoutDescriptor<K>(b, kk));
}

// x = 0, for an accumulator about to take a product (pin it before the fence).
template <int N>
__device__ __forceinline__ void ZeroAccumulators(float (&x)[N][4]) {
#pragma unroll
  for (int j = 0; j < N; ++j) x[j][0] = x[j][1] = x[j][2] = x[j][3] = 0.0f;
}

// The warpgroup products the attention kernels use, each issued, committed
// and waited for at once (so results are readable on return).

// x = A · B and y = A2 · B2 over K: A, A2 the warp's resident A fragments
// (its 16 rows x K, one per k-step), B, B2 N x K tiles in the core-matrix
// layout. x and y are zeroed first.
template <int N, int K>
__device__ __forceinline__ void WgmmaDualTileProduct(float (&x)[N / 8][4],
                                                     const uint32_t (&a)[K / 16][4],
                                                     const __nv_bfloat16* b,
                                                     float (&y)[N / 8][4],
                                                     const uint32_t (&a2)[K / 16][4],
                                                     const __nv_bfloat16* b2) {
  ZeroAccumulators(x);
  ZeroAccumulators(y);
  WgmmaPin(x);
  WgmmaPin(y);
  WgmmaFence();
  WgmmaIssueProduct<N, K>(x, a, b);
  WgmmaIssueProduct<N, K>(y, a2, b2);
  WgmmaCommit();
  WgmmaWait<0>();
  WgmmaPin(x);
  WgmmaPin(y);
}

// x = A · B for one pair (WgmmaDualTileProduct).
template <int N, int K>
__device__ __forceinline__ void WgmmaTileProduct(float (&x)[N / 8][4],
                                                 const uint32_t (&a)[K / 16][4],
                                                 const __nv_bfloat16* b) {
  ZeroAccumulators(x);
  WgmmaPin(x);
  WgmmaFence();
  WgmmaIssueProduct<N, K>(x, a, b);
  WgmmaCommit();
  WgmmaWait<0>();
  WgmmaPin(x);
}

// The descriptor of k-step kk of B (kK x N) for the products below: B
// stored transposed, as an N x kK core tile (K-major), or with kNMajor as
// is, a kK x N core tile read with the instruction's transpose bit.
template <bool kNMajor, int N, int kK>
__device__ __forceinline__ uint64_t ProductBDescriptor(const void* b, int kk) {
  if constexpr (kNMajor) {
    return CoreLayoutDescriptorNMajor<N>(b, kk);
  } else {
    return CoreLayoutDescriptor<kK>(b, kk);
  }
}

// c += A · B over kK, issued only: af the A fragments (AccToFragA of P or
// dS, one per k-step), B the kK x N operand as ProductBDescriptor reads it.
template <int N, int kK, bool kNMajor = false>
__device__ __forceinline__ void WgmmaIssueAccumulate(float (&c)[N / 8][4],
                                                     const uint32_t (&af)[kK / 16][4],
                                                     const __nv_bfloat16* b) {
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    WgmmaBf16<N, kNMajor>(c, af[kk], ProductBDescriptor<kNMajor, N, kK>(b, kk));
  }
}

// c += A · B and c2 += A2 · B2 over kK, with A, A2 16 x kK tiles held as
// accumulators (rounded to bf16: P, dS) and B, B2 the kK x N operands (V,
// dO, Q, K) as ProductBDescriptor reads them: transposed core tiles (V^T,
// dO^T, Q^T, K^T), or with kNMajor the tiles as loaded. Every A fragment is
// written before the fence: a wgmma may read its registers until the wait.
template <int N, int kK, bool kNMajor = false>
__device__ __forceinline__ void WgmmaDualAccumulate(float (&c)[N / 8][4],
                                                    const float (&a)[kK / 8][4],
                                                    const __nv_bfloat16* b,
                                                    float (&c2)[N / 8][4],
                                                    const float (&a2)[kK / 8][4],
                                                    const __nv_bfloat16* b2) {
  uint32_t af[kK / 16][4], af2[kK / 16][4];
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    AccToFragA(af[kk], a, kk);
    AccToFragA(af2[kk], a2, kk);
  }
  WgmmaPin(af);
  WgmmaPin(af2);
  WgmmaPin(c);
  WgmmaPin(c2);
  WgmmaFence();
  WgmmaIssueAccumulate<N, kK, kNMajor>(c, af, b);
  WgmmaIssueAccumulate<N, kK, kNMajor>(c2, af2, b2);
  WgmmaCommit();
  WgmmaWait<0>();
  WgmmaPin(c);
  WgmmaPin(c2);
}

// c += A · B for one pair (WgmmaDualAccumulate).
template <int N, int kK, bool kNMajor = false>
__device__ __forceinline__ void WgmmaAccumulate(float (&c)[N / 8][4], const float (&a)[kK / 8][4],
                                                const __nv_bfloat16* b) {
  uint32_t af[kK / 16][4];
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) AccToFragA(af[kk], a, kk);
  WgmmaPin(af);
  WgmmaPin(c);
  WgmmaFence();
  WgmmaIssueAccumulate<N, kK, kNMajor>(c, af, b);
  WgmmaCommit();
  WgmmaWait<0>();
  WgmmaPin(c);
}

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_WGMMA_CUH_
