// Test helpers for CPU-vs-CUDA parity tests: random inputs, tensors on either
// device, and tolerance checks. The CPU reference (//core/kernels/cpu) always
// runs in f32; a bf16 GPU op is compared against the CPU op run on the same
// inputs rounded to bf16, so the tolerance covers only the GPU's own bf16
// rounding of outputs and intermediates.
//
// Tolerance: |got - want| <= atol * max|want| + rtol * |want|, so atol is
// relative to the largest reference magnitude (gradients and sums vary in
// scale from test to test).
#ifndef WEFT_CORE_KERNELS_CUDA_PARITY_UTIL_H_
#define WEFT_CORE_KERNELS_CUDA_PARITY_UTIL_H_

#include <cstdint>
#include <vector>

#include "core/kernels/kernel_ops.h"
#include "core/tensor/tensor.h"
#include "gtest/gtest.h"

namespace weft::cuda::testing {

inline const Device kGpu = Device::Cuda(0);
inline const KernelContext kCpuCtx{Device::Cpu(), nullptr};

KernelOps& CpuOps();
KernelOps& GpuOps();
// GPU 0 with a non-default stream (created once), so kernels are exercised
// off the legacy stream like in training.
KernelContext GpuCtx();

struct Tolerance {
  float rtol;
  float atol;
};
inline constexpr Tolerance kF32Tol{1e-5f, 1e-5f};
inline constexpr Tolerance kF32ReduceTol{1e-4f, 1e-4f};  // GEMM, attention, long sums
inline constexpr Tolerance kBf16Tol{1e-2f, 1e-2f};
inline constexpr Tolerance kBf16ReduceTol{2e-2f, 2e-2f};  // bf16 P/dS in attention, long sums

// Uniform in [-scale, scale), reproducible from the seed.
std::vector<float> Random(int64_t n, uint64_t seed, float scale = 1.0f);
// Values as a tensor of `dtype` holds them (bf16 rounds to nearest even).
std::vector<float> RoundTo(DType dtype, std::vector<float> v);

Tensor Host(const std::vector<float>& v, Shape shape);  // f32 on the CPU
Tensor HostI32(const std::vector<int32_t>& v, Shape shape);
Tensor Gpu(const std::vector<float>& v, Shape shape, DType dtype);
Tensor GpuI32(const std::vector<int32_t>& v, Shape shape);
Tensor GpuZeros(Shape shape, DType dtype);

// Contents as floats / raw bytes. Synchronizes the whole device first.
std::vector<float> Floats(const Tensor& t);
std::vector<uint8_t> Bytes(const Tensor& t);

::testing::AssertionResult Close(const std::vector<float>& got, const std::vector<float>& want,
                                 Tolerance tol);

inline Tolerance TolFor(DType dtype, bool reduce) {
  if (dtype == DType::kBF16) return reduce ? kBf16ReduceTol : kBf16Tol;
  return reduce ? kF32ReduceTol : kF32Tol;
}

}  // namespace weft::cuda::testing

#endif  // WEFT_CORE_KERNELS_CUDA_PARITY_UTIL_H_
