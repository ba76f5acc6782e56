// ActivationStore: what modules save in forward for their backward, kept
// per micro-batch slot rather than in module members, so several
// micro-batches can be between their forward and their backward at once
// (pipeline schedules, F0 F1 B0 B1 ...).
//
// An entry is keyed by (owner, slot); the owner is the module that saved it.
// A module's backward reads its entry for ctx.slot and drops it when done,
// so a slot holds exactly the activations of the micro-batches in flight.
// Thread-safe: single-process data parallelism runs replicas in threads.
#ifndef WEFT_CORE_NN_ACTIVATION_STORE_H_
#define WEFT_CORE_NN_ACTIVATION_STORE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "core/tensor/tensor.h"

namespace weft {

// One owner's saved state for one micro-batch. Modules name the tensor
// indexes they use (enum { kInput, kMean, ... }).
struct SavedActivations {
  static constexpr int kMaxTensors = 4;
  std::array<Tensor, kMaxTensors> tensors;
  Shape shape;         // e.g. the output shape to restore in backward
  bool flag = false;   // e.g. "dropout was applied"

  Tensor& operator[](int i) { return tensors[i]; }
  const Tensor& operator[](int i) const { return tensors[i]; }
};

class ActivationStore {
 public:
  // The entry of `owner` in `slot`, created empty on first use. The
  // reference stays valid until the entry is dropped.
  SavedActivations& Get(const void* owner, int slot);
  // The entry if it exists, else null (a backward without its forward).
  SavedActivations* Find(const void* owner, int slot);
  void Drop(const void* owner, int slot);
  // Drops every entry of `slot`: the micro-batch's memory is released.
  void DropSlot(int slot);
  void Clear();

  // Work a backward queued for later in `slot`: the weight gradients of a
  // backward split into B (input gradients) and W (weight gradients), which
  // zero-bubble pipeline schedules run apart. The closure holds what it
  // reads. RunDeferred runs the slot's work in queue order and forgets it.
  using DeferredWork = std::function<absl::Status()>;
  void Defer(int slot, DeferredWork work);
  absl::Status RunDeferred(int slot);
  int64_t NumDeferred(int slot) const;

  // Bytes of the distinct storage the saved tensors of `slot` reference
  // (views of one buffer count once).
  int64_t SlotBytes(int slot) const;
  int64_t TotalBytes() const;
  int64_t NumEntries() const;

 private:
  using Key = std::pair<const void*, int>;
  int64_t BytesWhere(bool all_slots, int slot) const;

  // std::mutex, not absl::Mutex: Debian's abseil is not built for
  // ThreadSanitizer, which then cannot see an absl::Mutex and reports the
  // maps below as racing (--config=tsan, activation_store_test).
  mutable std::mutex mu_;  // guards both maps
  absl::flat_hash_map<Key, std::unique_ptr<SavedActivations>> entries_;
  absl::flat_hash_map<int, std::vector<DeferredWork>> deferred_;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_ACTIVATION_STORE_H_
