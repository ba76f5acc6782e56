// Strided element copy with dtype conversion on the host. Floats convert with
// round-to-nearest-even; integer <-> float conversions follow C++ casts.
#ifndef WEFT_CORE_TENSOR_CPU_COPY_H_
#define WEFT_CORE_TENSOR_CPU_COPY_H_

#include "absl/status/status.h"
#include "core/tensor/strided_view.h"

namespace weft {

// dst and src must have the same shape. They must not overlap partially.
absl::Status CpuCopyStrided(const StridedView& dst, const StridedView& src);

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_CPU_COPY_H_
