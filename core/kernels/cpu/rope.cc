// Rotary position embedding fused with grouped-query packing: q, k, v from
// their projections into the packed qkv that the attention kernels read,
// each K/V head repeated for the query heads of its group (and the
// transpose for backward). Parallel over tokens; every output element is
// written by one thread, and a group's K/V gradients are summed in head
// order, so results do not depend on the thread count.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/cpu_ops.h"
#include "core/kernels/cpu/fast_math.h"
#include "core/kernels/cpu/thread_pool.h"

namespace weft::cpu {
namespace {

struct RopeShape {
  int64_t b = 0, t = 0, d = 0, heads = 0, kv_heads = 0;
  int64_t Group() const { return heads / kv_heads; }
};

absl::Status CheckRope(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv,
                       const Tensor& rope, const TokenChunks& positions, const char* op,
                       RopeShape* s) {
  WEFT_RETURN_IF_ERROR(CheckCpu(rope, absl::StrCat(op, " rope")));
  if (rope.ndim() != 2 || rope.dim(1) < 2 || rope.dim(1) % 2 != 0) {
    return InvalidArgument(absl::StrCat(op, " rope table ", ShapeString(rope.shape())),
                           "(positions, D) with D even: cos then sin of each pair");
  }
  s->d = rope.dim(1);
  WEFT_RETURN_IF_ERROR(CheckCpu(q, absl::StrCat(op, " q")));
  if (q.ndim() != 3 || q.dim(2) % s->d != 0) {
    return InvalidArgument(absl::StrCat(op, " q ", ShapeString(q.shape())),
                           absl::StrCat("(B, T, H*", s->d, ")"));
  }
  s->b = q.dim(0);
  s->t = q.dim(1);
  s->heads = q.dim(2) / s->d;
  WEFT_RETURN_IF_ERROR(CheckCpu(k, absl::StrCat(op, " k")));
  if (k.ndim() != 3 || k.dim(0) != s->b || k.dim(1) != s->t || k.dim(2) % s->d != 0 ||
      k.dim(2) == 0 || s->heads % (k.dim(2) / s->d) != 0) {
    return InvalidArgument(absl::StrCat(op, " k ", ShapeString(k.shape()), " with q ",
                                        ShapeString(q.shape())),
                           absl::StrCat("(B, T, G*", s->d, ") with G dividing the ", s->heads,
                                        " query heads"));
  }
  s->kv_heads = k.dim(2) / s->d;
  WEFT_RETURN_IF_ERROR(CheckShape(v, absl::StrCat(op, " v"), {s->b, s->t, s->kv_heads * s->d}));
  WEFT_RETURN_IF_ERROR(
      CheckShape(qkv, absl::StrCat(op, " qkv"), {s->b, s->t, 3 * s->heads * s->d}));
  if (positions.size() != s->t) {
    return InvalidArgument(absl::StrCat(op, " positions for ", positions.size(), " tokens"),
                           absl::StrCat("one position per token: ", s->t));
  }
  for (int64_t i = 0; i < s->t; ++i) {
    const int64_t p = positions.Position(i);
    if (p < 0 || p >= rope.dim(0)) {
      return InvalidArgument(absl::StrCat(op, ": token ", i, " at position ", p),
                             absl::StrCat("positions in [0, ", rope.dim(0), "), the rope table"),
                             "lower seq_len or raise max_seq_len");
    }
  }
  return absl::OkStatus();
}

// out = x rotated by the angles of `row` (cos, then sin); sign -1 rotates back.
WEFT_CLONES void Rotate(float* out, const float* x, const float* row, int64_t d, float sign) {
  const int64_t half = d / 2;
  const float* cs = row;
  const float* sn = row + half;
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = x[i], x2 = x[i + half], s = sign * sn[i];
    out[i] = x1 * cs[i] - x2 * s;
    out[i + half] = x2 * cs[i] + x1 * s;
  }
}

WEFT_CLONES void Accumulate(float* acc, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] += x[i];
}

}  // namespace

absl::Status CpuKernelOps::RopeQkvForward(const KernelContext&, Tensor& qkv, const Tensor& q,
                                          const Tensor& k, const Tensor& v, const Tensor& rope,
                                          const TokenChunks& positions) {
  RopeShape s;
  WEFT_RETURN_IF_ERROR(CheckRope(q, k, v, qkv, rope, positions, "rope_qkv", &s));
  const int64_t d = s.d, hd = s.heads * d, kd = s.kv_heads * d, group = s.Group();
  const float *pq = q.data<float>(), *pk = k.data<float>(), *pv = v.data<float>();
  const float* table = rope.data<float>();
  float* out = qkv.data<float>();
  ParallelFor(s.b * s.t, std::max<int64_t>(1, 8192 / (3 * hd)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = table + positions.Position(r % s.t) * d;
      float* o = out + r * 3 * hd;
      for (int64_t h = 0; h < s.heads; ++h) Rotate(o + h * d, pq + r * hd + h * d, row, d, 1.f);
      for (int64_t g = 0; g < s.kv_heads; ++g) {
        float* k0 = o + hd + g * group * d;
        float* v0 = o + 2 * hd + g * group * d;
        Rotate(k0, pk + r * kd + g * d, row, d, 1.f);
        std::memcpy(v0, pv + r * kd + g * d, d * sizeof(float));
        for (int64_t j = 1; j < group; ++j) {
          std::memcpy(k0 + j * d, k0, d * sizeof(float));
          std::memcpy(v0 + j * d, v0, d * sizeof(float));
        }
      }
    }
  });
  return absl::OkStatus();
}

absl::Status CpuKernelOps::RopeQkvBackward(const KernelContext&, Tensor& dq, Tensor& dk,
                                           Tensor& dv, const Tensor& dqkv, const Tensor& rope,
                                           const TokenChunks& positions) {
  RopeShape s;
  WEFT_RETURN_IF_ERROR(CheckRope(dq, dk, dv, dqkv, rope, positions, "rope_qkv backward", &s));
  const int64_t d = s.d, hd = s.heads * d, kd = s.kv_heads * d, group = s.Group();
  float *pq = dq.data<float>(), *pk = dk.data<float>(), *pv = dv.data<float>();
  const float* table = rope.data<float>();
  const float* in = dqkv.data<float>();
  ParallelFor(s.b * s.t, std::max<int64_t>(1, 8192 / (3 * hd)), [&](int64_t r0, int64_t r1) {
    float* sum = fast::Scratch(d);
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = table + positions.Position(r % s.t) * d;
      const float* src = in + r * 3 * hd;
      for (int64_t h = 0; h < s.heads; ++h) Rotate(pq + r * hd + h * d, src + h * d, row, d, -1.f);
      for (int64_t g = 0; g < s.kv_heads; ++g) {
        const float* k0 = src + hd + g * group * d;
        const float* v0 = src + 2 * hd + g * group * d;
        // Sum the group, then rotate once: the rotation is linear.
        std::memcpy(sum, k0, d * sizeof(float));
        float* vo = pv + r * kd + g * d;
        std::memcpy(vo, v0, d * sizeof(float));
        for (int64_t j = 1; j < group; ++j) {
          Accumulate(sum, k0 + j * d, d);
          Accumulate(vo, v0 + j * d, d);
        }
        Rotate(pk + r * kd + g * d, sum, row, d, -1.f);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace weft::cpu
