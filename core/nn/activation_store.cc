#include "core/nn/activation_store.h"

#include "absl/container/flat_hash_map.h"

namespace weft {

SavedActivations& ActivationStore::Get(const void* owner, int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<SavedActivations>& entry = entries_[Key(owner, slot)];
  if (entry == nullptr) entry = std::make_unique<SavedActivations>();
  return *entry;
}

SavedActivations* ActivationStore::Find(const void* owner, int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(Key(owner, slot));
  return it == entries_.end() ? nullptr : it->second.get();
}

void ActivationStore::Drop(const void* owner, int slot) {
  std::unique_ptr<SavedActivations> dropped;  // freed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(Key(owner, slot));
  if (it == entries_.end()) return;
  dropped = std::move(it->second);
  entries_.erase(it);
}

void ActivationStore::DropSlot(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::erase_if(entries_, [slot](const auto& kv) { return kv.first.second == slot; });
}

void ActivationStore::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
  deferred_.clear();
}

void ActivationStore::Defer(int slot, DeferredWork work) {
  std::lock_guard<std::mutex> lock(mu_);
  deferred_[slot].push_back(std::move(work));
}

absl::Status ActivationStore::RunDeferred(int slot) {
  std::vector<DeferredWork> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = deferred_.find(slot);
    if (it == deferred_.end()) return absl::OkStatus();
    work = std::move(it->second);
    deferred_.erase(it);
  }
  for (DeferredWork& w : work) {
    if (absl::Status s = w(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

int64_t ActivationStore::NumDeferred(int slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = deferred_.find(slot);
  return it == deferred_.end() ? 0 : static_cast<int64_t>(it->second.size());
}

int64_t ActivationStore::BytesWhere(bool all_slots, int slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  // Distinct storages, each counted at the largest extent any view reaches.
  absl::flat_hash_map<const void*, int64_t> extent;
  for (const auto& [key, saved] : entries_) {
    if (!all_slots && key.second != slot) continue;
    for (const Tensor& t : saved->tensors) {
      if (!t.defined()) continue;
      const int64_t end = (t.offset() + t.numel()) * static_cast<int64_t>(DTypeSize(t.dtype()));
      int64_t& e = extent[t.storage().get()];
      e = std::max(e, end);
    }
  }
  int64_t total = 0;
  for (const auto& [storage, bytes] : extent) total += bytes;
  return total;
}

int64_t ActivationStore::SlotBytes(int slot) const { return BytesWhere(false, slot); }
int64_t ActivationStore::TotalBytes() const { return BytesWhere(true, 0); }

int64_t ActivationStore::NumEntries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(entries_.size());
}

}  // namespace weft
