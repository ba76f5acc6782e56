// VisionKernelOps: the kernels of convolutional networks (convolution,
// batch normalization, pooling, ReLU), behind one interface per device type
// like KernelOps and MoeKernelOps. The CPU implementation lives in
// cpu/vision_*.cc; the meta device's (shapes only) in meta/.
//
// Layout: NCHW, contiguous, row-major; f32 on CPU. Conventions follow
// kernel_ops.h: ...Backward ops ACCUMULATE (+=) into parameter gradients
// and overwrite input gradients; statistics are f32. Results never depend
// on the thread count: every output element is computed by one thread in a
// fixed order.
#ifndef WEFT_CORE_KERNELS_VISION_OPS_H_
#define WEFT_CORE_KERNELS_VISION_OPS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/kernels/kernel_ops.h"
#include "core/tensor/tensor.h"

namespace weft {

// The geometry of one 2-D convolution (PyTorch's Conv2d arguments):
// x (batch, in_channels, in_h, in_w), weight (out_channels,
// in_channels / groups, kernel_h, kernel_w), out (batch, out_channels,
// out_h(), out_w()).
struct Conv2dShape {
  int64_t batch = 1, in_channels = 1, in_h = 1, in_w = 1;
  int64_t out_channels = 1, kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;

  int64_t out_h() const {
    return (in_h + 2 * pad_h - dilation_h * (kernel_h - 1) - 1) / stride_h + 1;
  }
  int64_t out_w() const {
    return (in_w + 2 * pad_w - dilation_w * (kernel_w - 1) - 1) / stride_w + 1;
  }
  // Positive sizes, groups dividing both channel counts, and a (dilated)
  // kernel no larger than the padded input: InvalidArgument naming the
  // numbers otherwise.
  absl::Status Validate() const;
  // e.g. "3x3/2 pad 1, 64->128 ch, 32x32 -> 16x16".
  std::string ToString() const;
  // Multiply-adds of the forward pass.
  double ForwardMacs() const;
};

// The geometry of a 2-D max or average pooling window over
// (batch, channels, in_h, in_w). Average pooling counts the zero padding in
// its divisor (PyTorch's count_include_pad=True default).
struct Pool2dShape {
  int64_t batch = 1, channels = 1, in_h = 1, in_w = 1;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;

  int64_t out_h() const { return (in_h + 2 * pad_h - kernel_h) / stride_h + 1; }
  int64_t out_w() const { return (in_w + 2 * pad_w - kernel_w) / stride_w + 1; }
  // Positive sizes, padding at most half the window, and a window no
  // larger than the padded input.
  absl::Status Validate() const;
};

class VisionKernelOps {
 public:
  virtual ~VisionKernelOps() = default;

  // out = conv(x, weight) [+ bias (out_channels) when defined].
  virtual absl::Status Conv2dForward(const KernelContext& ctx, Tensor& out, const Tensor& x,
                                     const Tensor& weight, const Tensor& bias,
                                     const Conv2dShape& shape) = 0;
  // dx overwritten (skipped when undefined: the network's input), dweight +=,
  // dbias += (when defined) from dy (batch, out_channels, out_h, out_w).
  virtual absl::Status Conv2dBackward(const KernelContext& ctx, Tensor& dx, Tensor& dweight,
                                      Tensor& dbias, const Tensor& dy, const Tensor& x,
                                      const Tensor& weight, const Conv2dShape& shape) = 0;

  // Batch normalization of x (N, C, H, W) per channel, over the N*H*W
  // values of each channel, in steps around an optional all-reduce of the
  // statistics (synchronized batch norm sums them over data-parallel
  // ranks between the steps):
  //  1. BatchNormStats: stats (2C + 1) f32 = [sum_c x, sum_c x^2, count],
  //     sums accumulated in f64 and stored as f32, count = N*H*W.
  //  [all-reduce sum of stats]
  //  2. BatchNormMoments: mean (C) = sum / count, rstd (C) =
  //     1 / sqrt(sumsq / count - mean^2 + eps) (the biased variance, clamped
  //     at 0). When running_mean and running_var (C) f32 are defined they
  //     move by `momentum`: r = (1 - momentum) * r + momentum * batch, with
  //     the unbiased variance (count / (count - 1)) for running_var.
  //  3. BatchNormApply: out = (x - mean) * rstd * weight + bias.
  // Evaluation skips 1 and 2: BatchNormRunningMoments gives mean, rstd from
  // the running statistics.
  virtual absl::Status BatchNormStats(const KernelContext& ctx, Tensor& stats,
                                      const Tensor& x) = 0;
  virtual absl::Status BatchNormMoments(const KernelContext& ctx, Tensor& mean, Tensor& rstd,
                                        const Tensor& stats, float eps, Tensor& running_mean,
                                        Tensor& running_var, float momentum) = 0;
  virtual absl::Status BatchNormRunningMoments(const KernelContext& ctx, Tensor& mean,
                                               Tensor& rstd, const Tensor& running_mean,
                                               const Tensor& running_var, float eps) = 0;
  virtual absl::Status BatchNormApply(const KernelContext& ctx, Tensor& out, const Tensor& x,
                                      const Tensor& mean, const Tensor& rstd,
                                      const Tensor& weight, const Tensor& bias) = 0;
  // Backward, in the same two steps:
  //  1. BatchNormGradStats: grad_stats (2C + 1) f32 = [sum_c dy,
  //     sum_c dy * xhat, count] with xhat = (x - mean) * rstd; dweight +=
  //     sum_c dy * xhat and dbias += sum_c dy (this rank's values: data
  //     parallelism reduces them like any gradient).
  //  [all-reduce sum of grad_stats]
  //  2. BatchNormBackward: dx = weight * rstd * (dy - g0 / count - xhat * g1 / count)
  //     with g = grad_stats. Training only: batch statistics depend on x.
  virtual absl::Status BatchNormGradStats(const KernelContext& ctx, Tensor& grad_stats,
                                          Tensor& dweight, Tensor& dbias, const Tensor& dy,
                                          const Tensor& x, const Tensor& mean,
                                          const Tensor& rstd) = 0;
  virtual absl::Status BatchNormBackward(const KernelContext& ctx, Tensor& dx, const Tensor& dy,
                                         const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                         const Tensor& weight, const Tensor& grad_stats) = 0;
  // The eval-mode backward (fixed statistics: an affine map per channel):
  // dx = dy * weight * rstd; dweight += sum dy * xhat, dbias += sum dy.
  virtual absl::Status BatchNormAffineBackward(const KernelContext& ctx, Tensor& dx,
                                               Tensor& dweight, Tensor& dbias, const Tensor& dy,
                                               const Tensor& x, const Tensor& mean,
                                               const Tensor& rstd, const Tensor& weight) = 0;

  // out = max(x, 0) (any shape; out may alias x).
  virtual absl::Status ReluForward(const KernelContext& ctx, Tensor& out, const Tensor& x) = 0;
  // dx = dy where out > 0, else 0 (dx may alias dy).
  virtual absl::Status ReluBackward(const KernelContext& ctx, Tensor& dx, const Tensor& dy,
                                    const Tensor& out) = 0;

  // Max pooling: out (N, C, out_h, out_w) and argmax (same shape) i32, the
  // index within the input plane (h * in_w + w) of each window's first
  // maximum in row-major order; padding never wins.
  virtual absl::Status MaxPool2dForward(const KernelContext& ctx, Tensor& out, Tensor& argmax,
                                        const Tensor& x, const Pool2dShape& shape) = 0;
  // dx (N, C, in_h, in_w) overwritten: each dy added at its argmax.
  virtual absl::Status MaxPool2dBackward(const KernelContext& ctx, Tensor& dx, const Tensor& dy,
                                         const Tensor& argmax, const Pool2dShape& shape) = 0;
  virtual absl::Status AvgPool2dForward(const KernelContext& ctx, Tensor& out, const Tensor& x,
                                        const Pool2dShape& shape) = 0;
  virtual absl::Status AvgPool2dBackward(const KernelContext& ctx, Tensor& dx, const Tensor& dy,
                                         const Pool2dShape& shape) = 0;
  // Adaptive average pooling of x (N, C, H, W) to out (N, C, OH, OW):
  // output cell (i, j) averages rows [floor(i*H/OH), ceil((i+1)*H/OH)) and
  // the columns alike (PyTorch's bins). (1, 1) is global average pooling.
  virtual absl::Status AdaptiveAvgPool2dForward(const KernelContext& ctx, Tensor& out,
                                                const Tensor& x) = 0;
  // dx (N, C, H, W) overwritten from dy (N, C, OH, OW).
  virtual absl::Status AdaptiveAvgPool2dBackward(const KernelContext& ctx, Tensor& dx,
                                                 const Tensor& dy) = 0;
};

void RegisterVisionKernelOps(DeviceType type, VisionKernelOps* ops);
// FailedPrecondition naming the device when none is registered for it
// (CUDA has no vision kernels yet).
absl::StatusOr<VisionKernelOps*> GetVisionKernelOps(DeviceType type);
bool RegisterVisionKernelOpsAtStartup(DeviceType type, VisionKernelOps* ops);

}  // namespace weft

#endif  // WEFT_CORE_KERNELS_VISION_OPS_H_
