#include "data/batch_ring.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/check.h"
#include "core/base/errors.h"

namespace weft::data {

// Hands out one fixed buffer (a field of a slot) through the Allocator
// interface, so a Tensor over it tells the ring when its last view dies.
class BatchRing::SlotAllocator final : public Allocator {
 public:
  SlotAllocator(BatchRing* ring, int slot, void* buffer, size_t capacity)
      : ring_(ring), slot_(slot), buffer_(buffer), capacity_(capacity) {}

  absl::StatusOr<void*> Allocate(size_t bytes, NativeStream) override {
    WEFT_CHECK(keep_alive_ == nullptr) << "ring slot " << slot_ << " lent twice";
    WEFT_CHECK_LE(bytes, capacity_);
    keep_alive_ = ring_->shared_from_this();
    return buffer_;
  }

  void Free(void* ptr) override {
    WEFT_CHECK(ptr == buffer_);
    // Returning the field may drop the last reference to the ring, which owns
    // this allocator: nothing touches `this` after `keep` goes out of scope.
    std::shared_ptr<BatchRing> keep = std::move(keep_alive_);
    keep->OnFieldReturned(slot_);
  }

  AllocatorStats Stats() const override { return {}; }
  void ResetPeak() override {}
  Device device() const override { return Device::Cpu(); }
  bool pinned() const override { return ring_->pinned(); }
  std::string Name() const override { return "batch-ring-slot"; }
  // A clone of a lent batch gets memory of its own, of the ring's kind.
  Allocator* ForCopies() override { return ring_->host_; }

 private:
  BatchRing* const ring_;
  const int slot_;
  void* const buffer_;
  const size_t capacity_;
  std::shared_ptr<BatchRing> keep_alive_;  // set while lent
};

BatchRing::BatchRing(std::vector<FieldSpec> fields, int64_t batch_size, Allocator* host)
    : fields_(std::move(fields)), batch_size_(batch_size), host_(host) {}

absl::StatusOr<std::shared_ptr<BatchRing>> BatchRing::Create(std::vector<FieldSpec> fields,
                                                             int64_t batch_size, int num_slots,
                                                             Allocator* host) {
  if (batch_size < 1 || num_slots < 1 || fields.empty()) {
    return InvalidArgument(absl::StrCat("batch ring of ", num_slots, " slots x ", batch_size,
                                        " samples x ", fields.size(), " fields"),
                           "positive sizes");
  }
  std::shared_ptr<BatchRing> ring(new BatchRing(std::move(fields), batch_size, host));
  ring->slots_.resize(num_slots);
  for (int s = 0; s < num_slots; ++s) {
    Slot& slot = ring->slots_[s];
    for (const FieldSpec& f : ring->fields_) {
      const size_t bytes = f.SampleBytes() * static_cast<size_t>(batch_size);
      auto buffer = host->Allocate(bytes, nullptr);
      if (!buffer.ok()) {
        return Annotate(buffer.status(), absl::StrCat("allocating ", num_slots, " loader slots of ",
                                                      bytes, " bytes for field '", f.name, "'"));
      }
      slot.fields.push_back(*buffer);
      slot.allocators.push_back(
          std::make_unique<SlotAllocator>(ring.get(), s, *buffer, bytes));
    }
    ring->free_.push_back(s);
  }
  return ring;
}

BatchRing::~BatchRing() {
  for (Slot& slot : slots_) {
    // The copy engine may still read the buffer; wait before freeing it.
    if (slot.pending_copy != nullptr) (void)slot.pending_copy->Synchronize();
    for (void* p : slot.fields) host_->Free(p);
  }
}

int BatchRing::Acquire(int64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return cancelled_ || (ticket == next_ticket_ && !free_.empty()); });
  if (cancelled_) return -1;
  ++next_ticket_;
  const int slot = free_.front();
  free_.pop_front();
  cv_.notify_all();  // the next ticket may proceed
  return slot;
}

void BatchRing::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  cv_.notify_all();
}

void BatchRing::ResetTickets(int64_t next) {
  std::lock_guard<std::mutex> lock(mu_);
  next_ticket_ = next;
  cancelled_ = false;
}

void BatchRing::Release(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(slot);
  cv_.notify_all();
}

absl::Status BatchRing::WaitForCopy(int slot) {
  std::shared_ptr<Event> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending = std::move(slots_[slot].pending_copy);
  }
  if (pending == nullptr) return absl::OkStatus();
  return pending->Synchronize();
}

void BatchRing::SetPendingCopy(int slot, std::shared_ptr<Event> done) {
  std::lock_guard<std::mutex> lock(mu_);
  slots_[slot].pending_copy = std::move(done);
}

std::vector<Tensor> BatchRing::Lend(int slot, int64_t rows) {
  WEFT_CHECK(rows >= 1 && rows <= batch_size_) << "rows=" << rows;
  const int n = static_cast<int>(fields_.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    WEFT_CHECK_EQ(slots_[slot].lent_fields, 0) << "slot " << slot << " is already lent";
    slots_[slot].lent_fields = n;
  }
  std::vector<Tensor> out;
  out.reserve(n);
  for (int f = 0; f < n; ++f) {
    Shape shape = {batch_size_};
    shape.insert(shape.end(), fields_[f].shape.begin(), fields_[f].shape.end());
    // Cannot fail: the allocator hands back the slot's own buffer (and a
    // failure half-way would leave the slot counted as lent forever).
    absl::StatusOr<Tensor> t = Tensor::Empty(shape, fields_[f].dtype, Device::Cpu(),
                                             slots_[slot].allocators[f].get());
    WEFT_CHECK_OK(t.status());
    out.push_back(rows == batch_size_ ? *std::move(t) : t->Slice(0, 0, rows));
  }
  return out;
}

int BatchRing::NumLent() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const Slot& s : slots_) n += s.lent_fields > 0 ? 1 : 0;
  return n;
}

void BatchRing::OnFieldReturned(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (--slots_[slot].lent_fields == 0) {
    free_.push_back(slot);
    cv_.notify_all();
  }
}

}  // namespace weft::data
