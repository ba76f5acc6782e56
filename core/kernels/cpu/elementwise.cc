// GELU, residual add, scale and dropout: single passes over contiguous data
// (dropout on the kernel thread pool, its Philox in AVX2 where the CPU has it).
#include <algorithm>

#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/cpu_ops.h"
#include "core/kernels/cpu/dropout_avx2.h"
#include "core/kernels/cpu/gelu_math.h"
#include "core/kernels/cpu/thread_pool.h"
#include "core/kernels/philox.h"

namespace weft::cpu {

absl::Status CpuKernelOps::GeluForward(const KernelContext&, Tensor& out, const Tensor& x) {
  WEFT_RETURN_IF_ERROR(CheckCpu(x, "gelu x"));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "gelu out", x.numel()));
  const float* px = x.data<float>();
  float* po = out.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) po[i] = Gelu(px[i]);
  return absl::OkStatus();
}

absl::Status CpuKernelOps::GeluBackward(const KernelContext&, Tensor& dx, const Tensor& dy,
                                        const Tensor& x) {
  WEFT_RETURN_IF_ERROR(CheckCpu(x, "gelu x"));
  WEFT_RETURN_IF_ERROR(CheckNumel(dy, "gelu dy", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckNumel(dx, "gelu dx", x.numel()));
  const float* px = x.data<float>();
  const float* pdy = dy.data<float>();
  float* pdx = dx.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) pdx[i] = pdy[i] * GeluGrad(px[i]);
  return absl::OkStatus();
}

absl::Status CpuKernelOps::Add(const KernelContext&, Tensor& out, const Tensor& a,
                               const Tensor& b) {
  WEFT_RETURN_IF_ERROR(CheckCpu(a, "add a"));
  WEFT_RETURN_IF_ERROR(CheckNumel(b, "add b", a.numel()));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "add out", a.numel()));
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i) po[i] = pa[i] + pb[i];
  return absl::OkStatus();
}

absl::Status CpuKernelOps::Scale(const KernelContext&, Tensor& x, float scale) {
  WEFT_RETURN_IF_ERROR(CheckFloat(x, "scale x"));
  for (int64_t i = 0; i < x.numel(); ++i) StoreF(x, i, LoadF(x, i) * scale);
  return absl::OkStatus();
}

namespace {

absl::Status Dropout(Tensor& out, const Tensor& in, float p, DropoutKey key) {
  if (!(p >= 0.f && p < 1.f)) {
    return InvalidArgument("dropout probability out of range", "0 <= p < 1");
  }
  key.seed = ResolvedSeed(key);  // host memory here
  key.seed_in_memory = nullptr;
  WEFT_RETURN_IF_ERROR(CheckCpu(in, "dropout input"));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "dropout output", in.numel()));
  const float keep_scale = 1.0f / (1.0f - p);
  const float* pi = in.data<float>();
  float* po = out.data<float>();
  // The mask is a function of each element's position alone, so splitting
  // the range over threads (each with its own cursor) cannot change it: the
  // reference and the production kernels share this one loop.
  // With AVX2, whole groups of eight Philox blocks inside a sample take the
  // vector kernel (the same bits); the rest, up to a block boundary or a
  // sample's end, takes the cursor.
  const bool vector = HasAvx2();
  ParallelFor(in.numel(), 16384, [&](int64_t i0, int64_t i1) {
    DropoutCursor at(key, static_cast<uint64_t>(i0));
    int64_t i = i0;
    while (i < i1) {
      const uint64_t room = std::min<uint64_t>(i1 - i, at.LeftInSample());
      if (vector && (at.within & 3) == 0 && room >= 32) {
        const uint64_t n = room & ~uint64_t{31};
        DropoutBlocksAvx2(po + i, pi + i, static_cast<int64_t>(n), at.within >> 2, key.seed,
                          at.sample, p, keep_scale);
        i += static_cast<int64_t>(n);
        at.Skip(n);
        continue;
      }
      po[i] = at.Keep(p) ? pi[i] * keep_scale : 0.f;
      ++i;
      at.Next();
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::Status CpuKernelOps::DropoutForward(const KernelContext&, Tensor& out, const Tensor& x,
                                          float p, const DropoutKey& key) {
  return Dropout(out, x, p, key);
}

absl::Status CpuKernelOps::DropoutBackward(const KernelContext&, Tensor& dx, const Tensor& dy,
                                           float p, const DropoutKey& key) {
  // The same mask and scale apply to the gradient.
  return Dropout(dx, dy, p, key);
}

}  // namespace weft::cpu
