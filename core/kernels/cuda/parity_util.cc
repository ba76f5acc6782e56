#include "core/kernels/cuda/parity_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/base/check.h"
#include "core/tensor/stream.h"

namespace weft::cuda::testing {

KernelOps& CpuOps() {
  absl::StatusOr<KernelOps*> ops = GetKernelOps(DeviceType::kCPU);
  WEFT_CHECK(ops.ok()) << ops.status();
  return **ops;
}

KernelOps& GpuOps() {
  absl::StatusOr<KernelOps*> ops = GetKernelOps(DeviceType::kCUDA);
  WEFT_CHECK(ops.ok()) << ops.status();
  return **ops;
}

KernelContext GpuCtx() {
  static Stream* stream = [] {
    absl::StatusOr<Stream> s = Stream::Create(kGpu);
    WEFT_CHECK(s.ok()) << s.status();
    return new Stream(std::move(*s));
  }();
  return KernelContext{kGpu, stream->native()};
}

std::vector<float> Random(int64_t n, uint64_t seed, float scale) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

std::vector<float> RoundTo(DType dtype, std::vector<float> v) {
  if (dtype == DType::kBF16) {
    for (float& x : v) x = Bf16BitsToFloat(FloatToBf16Bits(x));
  }
  return v;
}

Tensor Host(const std::vector<float>& v, Shape shape) {
  absl::StatusOr<Tensor> t = Tensor::FromFloats(v, std::move(shape), DType::kF32);
  WEFT_CHECK(t.ok()) << t.status();
  return *t;
}

Tensor HostI32(const std::vector<int32_t>& v, Shape shape) {
  absl::StatusOr<Tensor> t = Tensor::FromVector<int32_t>(v, std::move(shape));
  WEFT_CHECK(t.ok()) << t.status();
  return *t;
}

Tensor Gpu(const std::vector<float>& v, Shape shape, DType dtype) {
  absl::StatusOr<Tensor> host = Tensor::FromFloats(v, std::move(shape), dtype);
  WEFT_CHECK(host.ok()) << host.status();
  absl::StatusOr<Tensor> dev = host->To(kGpu);
  WEFT_CHECK(dev.ok()) << dev.status();
  return *dev;
}

Tensor GpuI32(const std::vector<int32_t>& v, Shape shape) {
  absl::StatusOr<Tensor> dev = HostI32(v, std::move(shape)).To(kGpu);
  WEFT_CHECK(dev.ok()) << dev.status();
  return *dev;
}

Tensor GpuZeros(Shape shape, DType dtype) {
  absl::StatusOr<Tensor> t = Tensor::Zeros(std::move(shape), dtype, kGpu);
  WEFT_CHECK(t.ok()) << t.status();
  return *t;
}

std::vector<float> Floats(const Tensor& t) {
  absl::StatusOr<std::vector<float>> v = t.ToFloats();
  WEFT_CHECK(v.ok()) << v.status();
  return *v;
}

std::vector<uint8_t> Bytes(const Tensor& t) {
  absl::StatusOr<Tensor> host = t.To(Device::Cpu());
  WEFT_CHECK(host.ok()) << host.status();
  std::vector<uint8_t> out(host->nbytes());
  std::memcpy(out.data(), host->raw_data(), out.size());
  return out;
}

::testing::AssertionResult Close(const std::vector<float>& got, const std::vector<float>& want,
                                 Tolerance tol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  }
  float scale = 1e-30f;  // all-zero references must be matched exactly
  for (float w : want) scale = std::max(scale, std::fabs(w));
  size_t bad = 0, worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double limit = tol.atol * scale + tol.rtol * std::fabs(want[i]);
    const double err = std::fabs(double(got[i]) - double(want[i]));
    if (!(err <= limit)) {  // also catches NaN
      ++bad;
      const double excess = std::isnan(err) ? 1e30 : err - limit;
      if (excess > worst_excess) {
        worst_excess = excess;
        worst = i;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements differ (rtol " << tol.rtol << ", atol "
         << tol.atol << " x " << scale << "); worst at " << worst << ": got " << got[worst]
         << ", want " << want[worst];
}

}  // namespace weft::cuda::testing
