// BatchRing: the fixed set of host buffers ("slots") that loader workers
// assemble batches into. Slots are allocated once from PinnedHostAllocator()
// (page-locked when a GPU is present, so H2D copies can be async) and reused
// for the life of the loader: no allocation per batch.
//
// A slot is handed out in one of two ways:
//   - Lend: as tensors viewing the slot. The slot is free again only when
//     the last of those tensors (or of their views) is destroyed, so a batch
//     can never be overwritten while someone still reads it.
//   - After an async copy out of it: SetPendingCopy records the copy's
//     event, the slot is released, and whoever acquires it next waits for
//     that event (WaitForCopy) before overwriting it.
//
// Acquire is ticketed: batch k gets a slot before batch k+1 does. The oldest
// unfinished batch can therefore always make progress, which rules out a
// deadlock where younger prefetched batches hold every slot while the
// consumer waits for the oldest one.
//
// The ring is shared-owned: lent tensors keep it alive, so batches may
// outlive the DataLoader that produced them.
#ifndef WEFT_DATA_BATCH_RING_H_
#define WEFT_DATA_BATCH_RING_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/allocator.h"
#include "core/tensor/stream.h"
#include "core/tensor/tensor.h"
#include "data/dataset.h"

namespace weft::data {

class BatchRing : public std::enable_shared_from_this<BatchRing> {
 public:
  // `num_slots` buffers of `batch_size` samples of every field, from `host`.
  static absl::StatusOr<std::shared_ptr<BatchRing>> Create(std::vector<FieldSpec> fields,
                                                           int64_t batch_size, int num_slots,
                                                           Allocator* host);
  ~BatchRing();
  BatchRing(const BatchRing&) = delete;
  BatchRing& operator=(const BatchRing&) = delete;

  int num_slots() const { return static_cast<int>(slots_.size()); }
  bool pinned() const { return host_->pinned(); }

  // Blocks until every smaller ticket has a slot and a slot is free; returns
  // it, or -1 once Cancel() was called.
  int Acquire(int64_t ticket);
  // Wakes every Acquire with -1 until ResetTickets.
  void Cancel();
  // Restarts ticketing at `next` and clears the cancellation.
  void ResetTickets(int64_t next);

  // Puts an acquired, never-lent slot back (a discarded prefetch).
  void Release(int slot);
  // Waits until the last async copy out of `slot` has finished.
  absl::Status WaitForCopy(int slot);
  // Records that an async copy out of `slot` finishes with `done`.
  void SetPendingCopy(int slot, std::shared_ptr<Event> done);

  // Start of field `field`'s buffer in `slot`: batch_size samples, row-major.
  void* FieldData(int slot, int field) const { return slots_[slot].fields[field]; }
  // Tensors [rows, ...field shape] over the first `rows` samples of `slot`.
  // The slot returns to the free list when all of them have been destroyed.
  std::vector<Tensor> Lend(int slot, int64_t rows);
  // Slots currently lent out as tensors.
  int NumLent() const;

 private:
  class SlotAllocator;
  struct Slot {
    std::vector<void*> fields;
    std::vector<std::unique_ptr<SlotAllocator>> allocators;  // one per field
    int lent_fields = 0;
    std::shared_ptr<Event> pending_copy;
  };

  BatchRing(std::vector<FieldSpec> fields, int64_t batch_size, Allocator* host);
  void OnFieldReturned(int slot);

  const std::vector<FieldSpec> fields_;
  const int64_t batch_size_;
  Allocator* const host_;
  std::vector<Slot> slots_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> free_;  // FIFO: the oldest copy is the likeliest to be done
  int64_t next_ticket_ = 0;
  bool cancelled_ = false;
};

}  // namespace weft::data

#endif  // WEFT_DATA_BATCH_RING_H_
