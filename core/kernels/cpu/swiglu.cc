// SwiGLU (Llama's MLP activation) over a fused gate|up projection. Each row
// is independent: parallel over rows, bitwise the same for any thread count.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/cpu_ops.h"
#include "core/kernels/cpu/fast_math.h"
#include "core/kernels/cpu/thread_pool.h"

namespace weft::cpu {
namespace {

absl::Status CheckGateUp(const Tensor& gate_up, int64_t* rows, int64_t* h) {
  WEFT_RETURN_IF_ERROR(CheckCpu(gate_up, "swiglu gate_up"));
  if (gate_up.ndim() < 1 || gate_up.dim(-1) % 2 != 0 || gate_up.dim(-1) == 0) {
    return InvalidArgument(absl::StrCat("swiglu gate_up ", ShapeString(gate_up.shape())),
                           "(..., 2H): gate then up, H >= 1");
  }
  *h = gate_up.dim(-1) / 2;
  *rows = gate_up.numel() / (2 * *h);
  return absl::OkStatus();
}

inline float Sigmoid(float g) { return 1.0f / (1.0f + fast::ExpF(-g)); }

WEFT_CLONES void ForwardRows(float* out, const float* gu, int64_t r0, int64_t r1, int64_t h) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* g = gu + r * 2 * h;
    const float* u = g + h;
    float* o = out + r * h;
    for (int64_t i = 0; i < h; ++i) o[i] = g[i] * Sigmoid(g[i]) * u[i];
  }
}

WEFT_CLONES void BackwardRows(float* dgu, const float* dout, const float* gu, int64_t r0,
                              int64_t r1, int64_t h) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* g = gu + r * 2 * h;
    const float* u = g + h;
    const float* d = dout + r * h;
    float* dg = dgu + r * 2 * h;
    float* du = dg + h;
    for (int64_t i = 0; i < h; ++i) {
      const float s = Sigmoid(g[i]);
      const float silu = g[i] * s;
      const float gi = g[i], ui = u[i];  // read before writing: dgu may alias gu
      dg[i] = d[i] * ui * (s * (1.0f + gi * (1.0f - s)));
      du[i] = d[i] * silu;
    }
  }
}

}  // namespace

absl::Status CpuKernelOps::SwiGluForward(const KernelContext&, Tensor& out, const Tensor& gate_up) {
  int64_t rows = 0, h = 0;
  WEFT_RETURN_IF_ERROR(CheckGateUp(gate_up, &rows, &h));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "swiglu out", rows * h));
  float* po = out.data<float>();
  const float* pgu = gate_up.data<float>();
  // At least ~4K elements a thread: a pool hand-off costs about as much.
  ParallelFor(rows, std::max<int64_t>(1, 4096 / h),
              [&](int64_t r0, int64_t r1) { ForwardRows(po, pgu, r0, r1, h); });
  return absl::OkStatus();
}

absl::Status CpuKernelOps::SwiGluBackward(const KernelContext&, Tensor& dgate_up,
                                          const Tensor& dout, const Tensor& gate_up) {
  int64_t rows = 0, h = 0;
  WEFT_RETURN_IF_ERROR(CheckGateUp(gate_up, &rows, &h));
  WEFT_RETURN_IF_ERROR(CheckNumel(dout, "swiglu dout", rows * h));
  WEFT_RETURN_IF_ERROR(CheckNumel(dgate_up, "swiglu dgate_up", rows * 2 * h));
  float* pd = dgate_up.data<float>();
  const float *pdo = dout.data<float>(), *pgu = gate_up.data<float>();
  ParallelFor(rows, std::max<int64_t>(1, 4096 / h),
              [&](int64_t r0, int64_t r1) { BackwardRows(pd, pdo, pgu, r0, r1, h); });
  return absl::OkStatus();
}

}  // namespace weft::cpu
