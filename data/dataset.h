// Dataset: what the DataLoader reads. A dataset is a fixed number of samples,
// each made of the same named fields (dtype + per-sample shape); Fill writes
// one sample into one buffer per field. The loader stacks samples into
// batches of shape [B, ...per-sample shape], so a dataset never sees batches,
// ranks or threads.
//
// Implementations must be immutable after construction: Fill runs on several
// worker threads at once. Errors from Fill should name the source file and
// position (they reach the training loop through DataLoader::Next).
#ifndef WEFT_DATA_DATASET_H_
#define WEFT_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/tensor/dtype.h"
#include "core/tensor/tensor.h"

namespace weft::data {

struct FieldSpec {
  std::string name;  // "inputs", "targets", "image", "label"
  DType dtype = DType::kF32;
  Shape shape;       // per sample; {} for a scalar

  size_t SampleBytes() const { return static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype); }
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t num_samples() const = 0;
  virtual std::vector<FieldSpec> fields() const = 0;
  // Writes sample `index` (0 <= index < num_samples()) into dst[f], which has
  // room for fields()[f].SampleBytes(). Thread-safe.
  virtual absl::Status Fill(int64_t index, absl::Span<void* const> dst) const = 0;
  // One line for logs and errors, e.g. "token windows (T=1024) over 3 shards in /d".
  virtual std::string Describe() const = 0;
};

}  // namespace weft::data

#endif  // WEFT_DATA_DATASET_H_
