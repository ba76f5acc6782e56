#include "core/tensor/device.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft {

std::string Device::ToString() const {
  if (is_meta()) return "meta";
  return is_cpu() ? std::string("cpu") : absl::StrCat("cuda:", index);
}

absl::StatusOr<Device> ParseDevice(absl::string_view text) {
  if (text == "cpu") return Device::Cpu();
  if (text == "cuda") return Device::Cuda(0);
  if (text == "meta") return Device::Meta();
  int index = -1;
  if (text.rfind("cuda:", 0) == 0 && absl::SimpleAtoi(text.substr(5), &index) && index >= 0) {
    return Device::Cuda(index);
  }
  return InvalidArgument(absl::StrCat("unknown device '", text, "'"),
                         "'cpu', 'cuda', 'cuda:N' with N >= 0, or 'meta' (shapes only)");
}

}  // namespace weft
