// The dtypes a job computes and reduces gradients in on a device, or why
// it cannot: one check for the trainer and for memory estimates of it (an
// estimate of a job the trainer would refuse helps nobody).
#ifndef WEFT_CORE_RUNTIME_JOB_DTYPES_H_
#define WEFT_CORE_RUNTIME_JOB_DTYPES_H_

#include "absl/status/statusor.h"
#include "core/runtime/train_config.pb.h"
#include "core/tensor/device.h"
#include "core/tensor/dtype.h"

namespace weft {

// --dtype: auto (bf16 on CUDA, f32 on CPU), bf16 (CUDA only) or f32.
absl::StatusOr<DType> ComputeDTypeOn(const TrainConfig& c, Device device);
// --grad_dtype: f32, or bf16 (CUDA only).
absl::StatusOr<DType> GradDTypeOn(const TrainConfig& c, Device device);

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_JOB_DTYPES_H_
