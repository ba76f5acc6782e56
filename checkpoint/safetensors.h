// Reads and writes the safetensors format (huggingface/safetensors) for host
// f32 tensors, so weights move between weft and the Python ecosystem:
//   u64 little-endian N | N bytes of JSON header, space-padded so the buffer
//   starts 8-byte aligned | the byte buffer, tensors packed back to back.
// The header maps each name to {"dtype", "shape", "data_offsets": [begin,
// end)} relative to the buffer, plus optional "__metadata__" strings.
// Readers reject anything the reference implementation would: bad JSON,
// sizes that disagree with shape x dtype, overlaps, holes, truncation.
#ifndef WEFT_CHECKPOINT_SAFETENSORS_H_
#define WEFT_CHECKPOINT_SAFETENSORS_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/host_tensor.h"

namespace weft::ckpt {

struct SafetensorsWriteOptions {
  // Stored element type: "F32" (exact), "BF16" or "F16" (round to nearest even).
  std::string dtype = "F32";
  std::map<std::string, std::string> metadata;  // written as "__metadata__"
};

// Writes every tensor in name order (a scalar is shape {} with one value)
// through a temporary file that is fsynced and renamed over `path`.
absl::Status WriteSafetensors(const std::string& path,
                              const std::map<std::string, HostTensor>& tensors,
                              const SafetensorsWriteOptions& options = {});

struct SafetensorsFile {
  std::map<std::string, HostTensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Reads F32, BF16 and F16 tensors, widened to f32. Other dtypes are an
// error naming the tensor.
absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path);

}  // namespace weft::ckpt

#endif  // WEFT_CHECKPOINT_SAFETENSORS_H_
