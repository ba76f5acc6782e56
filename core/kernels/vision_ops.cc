#include "core/kernels/vision_ops.h"

#include <array>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/check.h"
#include "core/base/errors.h"

namespace weft {

absl::Status Conv2dShape::Validate() const {
  if (batch < 1 || in_channels < 1 || in_h < 1 || in_w < 1 || out_channels < 1 ||
      kernel_h < 1 || kernel_w < 1 || stride_h < 1 || stride_w < 1 || pad_h < 0 || pad_w < 0 ||
      dilation_h < 1 || dilation_w < 1 || groups < 1) {
    return InvalidArgument(absl::StrCat("convolution ", ToString()),
                           "positive sizes, kernel, stride, dilation and groups, and padding >= 0");
  }
  if (in_channels % groups != 0 || out_channels % groups != 0) {
    return InvalidArgument(absl::StrCat("convolution groups=", groups, " over ", in_channels,
                                        " input and ", out_channels, " output channels"),
                           "groups dividing both channel counts");
  }
  const int64_t reach_h = dilation_h * (kernel_h - 1) + 1, reach_w = dilation_w * (kernel_w - 1) + 1;
  if (reach_h > in_h + 2 * pad_h || reach_w > in_w + 2 * pad_w) {
    return InvalidArgument(
        absl::StrFormat("a %dx%d kernel (dilated %dx%d) over a %dx%d input padded to %dx%d",
                        kernel_h, kernel_w, reach_h, reach_w, in_h, in_w, in_h + 2 * pad_h,
                        in_w + 2 * pad_w),
        "a kernel no larger than the padded input",
        "the image is too small for this many downsampling layers: use larger images, "
        "more padding, or a smaller kernel");
  }
  return absl::OkStatus();
}

std::string Conv2dShape::ToString() const {
  std::string s = absl::StrFormat("%dx%d", kernel_h, kernel_w);
  if (stride_h != 1 || stride_w != 1) absl::StrAppendFormat(&s, "/%d", stride_h);
  if (pad_h != 0 || pad_w != 0) absl::StrAppendFormat(&s, " pad %d", pad_h);
  if (dilation_h != 1 || dilation_w != 1) absl::StrAppendFormat(&s, " dilation %d", dilation_h);
  if (groups != 1) absl::StrAppendFormat(&s, " groups %d", groups);
  absl::StrAppendFormat(&s, ", %d->%d ch, %dx%d -> %dx%d", in_channels, out_channels, in_h, in_w,
                        out_h(), out_w());
  return s;
}

double Conv2dShape::ForwardMacs() const {
  return static_cast<double>(batch) * out_channels * out_h() * out_w() *
         (in_channels / groups) * kernel_h * kernel_w;
}

absl::Status Pool2dShape::Validate() const {
  if (batch < 1 || channels < 1 || in_h < 1 || in_w < 1 || kernel_h < 1 || kernel_w < 1 ||
      stride_h < 1 || stride_w < 1 || pad_h < 0 || pad_w < 0) {
    return InvalidArgument(
        absl::StrFormat("pooling %dx%d/%d pad %d over %dx%d", kernel_h, kernel_w, stride_h, pad_h,
                        in_h, in_w),
        "positive sizes, window and stride, and padding >= 0");
  }
  if (2 * pad_h > kernel_h || 2 * pad_w > kernel_w) {
    return InvalidArgument(absl::StrFormat("pooling padding %dx%d with a %dx%d window", pad_h,
                                           pad_w, kernel_h, kernel_w),
                           "padding at most half the window");
  }
  if (kernel_h > in_h + 2 * pad_h || kernel_w > in_w + 2 * pad_w) {
    return InvalidArgument(absl::StrFormat("a %dx%d pooling window over a %dx%d input padded to "
                                           "%dx%d",
                                           kernel_h, kernel_w, in_h, in_w, in_h + 2 * pad_h,
                                           in_w + 2 * pad_w),
                           "a window no larger than the padded input");
  }
  return absl::OkStatus();
}

namespace {

struct VisionRegistry {
  std::mutex mu;
  std::array<VisionKernelOps*, kNumDeviceTypes> ops{};  // indexed by DeviceType
};

VisionRegistry& GetVisionRegistry() {
  static auto* r = new VisionRegistry;
  return *r;
}

}  // namespace

void RegisterVisionKernelOps(DeviceType type, VisionKernelOps* ops) {
  VisionRegistry& r = GetVisionRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  VisionKernelOps*& slot = r.ops[static_cast<int>(type)];
  WEFT_CHECK(slot == nullptr) << "two VisionKernelOps registered for one device type";
  slot = ops;
}

bool RegisterVisionKernelOpsAtStartup(DeviceType type, VisionKernelOps* ops) {
  RegisterVisionKernelOps(type, ops);
  return true;
}

absl::StatusOr<VisionKernelOps*> GetVisionKernelOps(DeviceType type) {
  VisionRegistry& r = GetVisionRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (VisionKernelOps* ops = r.ops[static_cast<int>(type)]) return ops;
  if (type == DeviceType::kCUDA) {
    return FailedPrecondition("convolution, batch norm and pooling have no CUDA kernels yet",
                              "--device=cpu for convolutional models",
                              "train the ResNet on CPU; the GPT and Llama models run on CUDA");
  }
  return FailedPrecondition("convolution kernels are not linked for this device",
                            "//core/kernels/cpu (or //core/kernels/meta) linked",
                            "depend on the device's kernel target");
}

}  // namespace weft
