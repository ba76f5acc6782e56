// Batch: what DataLoader::Next returns. One tensor per dataset field, each of
// shape [rows, ...per-sample shape] (rows == batch_size except for a short
// last batch when drop_last is false), on the loader's device.
//
// Lifetime and streams:
//   - CPU device: the tensors view a pinned ring slot of the loader. The slot
//     is reused only after every tensor of the batch, and every view or copy
//     of those Tensor handles, has been destroyed. Holding batches therefore
//     holds slots: keep at most a couple alive at a time (the ring has
//     prefetch_depth + 2 slots; Next fails rather than hangs if all are held).
//   - CUDA device: the tensors are device memory filled by an async copy on
//     the loader's copy stream. Call WaitOn(compute) before using them on
//     another stream: the compute stream then waits for this batch's copy
//     only (an event, no host sync), and the memory is not reused until the
//     work queued on `compute` so far has finished, even after the batch is
//     destroyed. On CPU WaitOn is a no-op, so training loops call it always.
#ifndef WEFT_DATA_BATCH_H_
#define WEFT_DATA_BATCH_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/tensor/stream.h"
#include "core/tensor/tensor.h"
#include "data/dataset.h"

namespace weft::data {

class Batch {
 public:
  Batch() = default;
  Batch(std::shared_ptr<const std::vector<FieldSpec>> fields, std::vector<Tensor> tensors,
        int64_t epoch, int64_t index, std::shared_ptr<Event> ready)
      : fields_(std::move(fields)),
        tensors_(std::move(tensors)),
        epoch_(epoch),
        index_(index),
        ready_(std::move(ready)) {}

  // The tensor of field `name` ("inputs", "targets", "image", "label").
  // An unknown name is a programmer error (aborts, listing the fields).
  const Tensor& Get(absl::string_view name) const;
  const std::vector<Tensor>& tensors() const { return tensors_; }
  const std::vector<FieldSpec>& fields() const { return *fields_; }

  int64_t rows() const { return tensors_.empty() ? 0 : tensors_[0].dim(0); }
  int64_t epoch() const { return epoch_; }
  int64_t index() const { return index_; }  // batch number within the epoch

  // Orders `compute` after this batch's host-to-device copy (see above).
  absl::Status WaitOn(const Stream& compute) const;
  // The copy's completion event; null on CPU, where data is ready on return.
  const std::shared_ptr<Event>& ready_event() const { return ready_; }

 private:
  std::shared_ptr<const std::vector<FieldSpec>> fields_;
  std::vector<Tensor> tensors_;
  int64_t epoch_ = 0;
  int64_t index_ = 0;
  std::shared_ptr<Event> ready_;
};

}  // namespace weft::data

#endif  // WEFT_DATA_BATCH_H_
