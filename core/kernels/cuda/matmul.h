// Row-major GEMM through cuBLASLt with fused epilogues.
//
//   out (M, N) [+]= op(a) (M, K) · op(b) (K, N), then the epilogue
//
// cuBLASLt is column-major, so we compute out^T = op(b)^T · op(a)^T: a
// row-major (R, C) matrix is the column-major (C, R) matrix with the same
// memory, which turns every row-major operand into its transpose for free.
//
// Per device: one cublasLt handle, a 32 MiB workspace per stream (concurrent
// GEMMs on two streams must not share one), and a cache of descriptors and
// heuristic results per shape/dtype/epilogue/alignment, so steady-state calls
// only set pointers and enqueue. Nothing here synchronizes the host.
//
// When cuBLASLt has no algorithm for a fused epilogue (dtype, alignment, or a
// leading dimension that is not a multiple of 8), the GEMM runs without it and
// matmul_kernels.h finishes the job: same results up to one extra rounding.
// GELU epilogues are fused for bf16 outputs only; f32 uses the exact unfused
// GELU so it matches the CPU reference to 1e-4.
#ifndef WEFT_CORE_KERNELS_CUDA_MATMUL_H_
#define WEFT_CORE_KERNELS_CUDA_MATMUL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "core/tensor/allocator.h"
#include "core/tensor/dtype.h"

namespace weft::cuda {

enum class MatmulEpilogue : uint8_t {
  kNone,
  kBias,      // out = mm + bias
  kBiasGelu,  // aux = mm + bias; out = gelu(aux)
  kDGelu,     // out = mm * gelu'(aux); with bias_grad: + its column sums
  // out [+]= mm; bias_grad (M, f32) = column sums of a (K, M) (trans_a
  // only): cuBLASLt's BGRADB, since our a is its B. Written, not added.
  kBiasGradA,
};

struct MatmulArgs {
  void* out = nullptr;  // (M, N)
  DType out_dtype = DType::kF32;
  const void* a = nullptr;  // (M, K), or (K, M) with trans_a
  const void* b = nullptr;  // (K, N), or (N, K) with trans_b
  DType ab_dtype = DType::kF32;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false;
  bool trans_b = false;
  bool accumulate = false;  // out += (kNone and kBiasGradA only)
  MatmulEpilogue epilogue = MatmulEpilogue::kNone;
  const void* bias = nullptr;  // (N)
  DType bias_dtype = DType::kF32;
  void* aux = nullptr;  // (M, N), same dtype as out
  // Written, not added (cuBLASLt overwrites): kBiasGradA (M) the column
  // sums of a; kDGelu (N), optional, the column sums of out (DGELU_BGRAD).
  float* bias_grad = nullptr;
  // Scratch of the unfused bias gradient; null: the device's default.
  Allocator* scratch_allocator = nullptr;
};

// Enqueues the GEMM on `stream` on device `device` (must be current).
// f32 inputs use full-f32 compute (no TF32) so parity with the CPU holds at
// 1e-4; bf16 inputs accumulate in f32 and may write f32 or bf16.
absl::Status Matmul(int device, const MatmulArgs& args, cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_MATMUL_H_
