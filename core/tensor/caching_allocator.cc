#include "core/tensor/caching_allocator.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "core/base/check.h"
#include "core/base/errors.h"

namespace weft {

struct CachingAllocator::Block {
  char* ptr = nullptr;
  size_t size = 0;       // bytes this block spans in its segment
  size_t requested = 0;  // bytes the caller asked for (while allocated)
  NativeStream stream = nullptr;
  bool small = false;
  bool allocated = false;
  int pending_events = 0;
  Block* prev = nullptr;  // neighbours inside the same segment
  Block* next = nullptr;
  size_t segment_size = 0;  // set on the first block of a segment only
  absl::flat_hash_set<NativeStream> other_streams;
};

bool CachingAllocator::BlockLess::operator()(const Block* a, const Block* b) const {
  return std::make_tuple(reinterpret_cast<uintptr_t>(a->stream), a->size,
                         reinterpret_cast<uintptr_t>(a->ptr)) <
         std::make_tuple(reinterpret_cast<uintptr_t>(b->stream), b->size,
                         reinterpret_cast<uintptr_t>(b->ptr));
}

CachingAllocator::CachingAllocator(std::string name, std::unique_ptr<DeviceMemorySource> source,
                                   bool capture_private)
    : name_(std::move(name)), source_(std::move(source)), capture_private_(capture_private) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Pending& p : pending_) source_->DestroyEvent(p.event);
  pending_.clear();
  // Live blocks are leaked deliberately: freeing memory a caller still uses
  // would be worse. Free segments go back to the source.
  ReleaseFreeSegments();
}

size_t CachingAllocator::RoundSize(size_t bytes) {
  if (bytes == 0) bytes = 1;
  return (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
}

size_t CachingAllocator::SegmentSize(size_t rounded) {
  if (rounded <= kSmallMax) return kSmallSegment;
  if (rounded < kLargeSegmentMax) return kLargeSegment;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

CachingAllocator::Block* CachingAllocator::FindFree(Pool& pool, NativeStream stream,
                                                    size_t size) {
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  // Do not carve a sub-10 MiB request out of an oversize cached block (one
  // from a segment made for a >= 10 MiB request): it would pin the whole
  // segment. Blocks up to the 20 MiB shared segment size are exactly what
  // those segments exist for, so they are reused. Large requests take any fit.
  if (!block->small && size < kLargeSegmentMax && block->size > kLargeSegment) return nullptr;
  pool.erase(it);
  return block;
}

absl::StatusOr<CachingAllocator::Block*> CachingAllocator::NewSegment(size_t size,
                                                                      NativeStream stream,
                                                                      bool small) {
  const size_t seg = SegmentSize(size);
  auto ptr = source_->Malloc(seg);
  // Out of memory: give cached segments back and try once more; not during
  // a capture, which freeing device memory would invalidate.
  if (!ptr.ok() && !source_->Capturing(stream)) {
    ReleaseFreeSegments();
    ptr = source_->Malloc(seg);
  }
  if (!ptr.ok()) {
    return MakeError(absl::StatusCode::kResourceExhausted,
                     absl::StrCat(name_, ": out of device memory allocating ", size,
                                  " bytes (segment ", seg, " bytes): ", ptr.status().message()),
                     "", absl::StrCat("allocator ", stats_.Get().ToString(),
                                      "; reduce micro_batch or shard the model (fsdp/zero)"));
  }
  auto* block = new Block;
  block->ptr = static_cast<char*>(*ptr);
  block->size = seg;
  block->stream = stream;
  block->small = small;
  block->segment_size = seg;
  ++num_segments_;
  stats_.OnReserve(static_cast<int64_t>(seg));
  return block;
}

absl::StatusOr<void*> CachingAllocator::Allocate(size_t bytes, NativeStream stream) {
  if (!capture_private_ && source_->Capturing(stream)) {
    return FailedPrecondition(
        absl::StrCat(name_, ": allocation of ", bytes, " bytes on a stream being captured"),
        "a captured step to allocate only from its graph's private allocator",
        "allocate through RunContext::allocator, not the device's default allocator");
  }
  std::lock_guard<std::mutex> lock(mu_);
  ProcessPendingEvents();
  const size_t size = RoundSize(bytes);
  const bool small = size <= kSmallMax;
  Pool& pool = PoolFor(small);
  Block* block = FindFree(pool, stream, size);
  if (block == nullptr) {
    auto fresh = NewSegment(size, stream, small);
    if (!fresh.ok()) return fresh.status();
    block = *fresh;
  }
  const size_t remaining = block->size - size;
  const bool split = small ? remaining >= kMinBlock : remaining > kSmallMax;
  if (split) {
    auto* rest = new Block;
    rest->ptr = block->ptr + size;
    rest->size = remaining;
    rest->stream = stream;
    rest->small = small;
    rest->prev = block;
    rest->next = block->next;
    if (block->next != nullptr) block->next->prev = rest;
    block->next = rest;
    block->size = size;
    pool.insert(rest);
  }
  block->allocated = true;
  block->requested = bytes;
  active_[block->ptr] = block;
  stats_.OnAlloc(static_cast<int64_t>(bytes));
  return static_cast<void*>(block->ptr);
}

void CachingAllocator::Free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(ptr);
  WEFT_CHECK(it != active_.end()) << name_ << ": Free of a pointer it did not allocate";
  Block* block = it->second;
  active_.erase(it);
  stats_.OnFree(static_cast<int64_t>(block->requested));
  block->allocated = false;
  // The graph being captured may read or write this block at every replay:
  // nothing else gets it again. A private allocator reuses it within the
  // capture (stream order is the graph's order) unless other streams used it.
  bool captured = source_->Capturing(block->stream);
  for (NativeStream s : block->other_streams) captured = captured || source_->Capturing(s);
  if (captured && (!capture_private_ || !block->other_streams.empty())) {
    ++block->pending_events;  // never completes: neighbours cannot merge it back
    block->other_streams.clear();
    capture_held_bytes_ += block->size;
    return;
  }
  if (!block->other_streams.empty()) {
    for (NativeStream s : block->other_streams) {
      auto event = source_->RecordEvent(s);
      // If an event cannot be recorded the device is broken; keeping the block
      // out of circulation forever is the safe choice.
      if (!event.ok()) {
        ++block->pending_events;
        continue;
      }
      pending_.push_back({*event, block});
      ++block->pending_events;
    }
    block->other_streams.clear();
    return;
  }
  ReturnBlock(block);
}

absl::Status CachingAllocator::RecordStream(void* ptr, NativeStream stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(ptr);
  if (it == active_.end()) {
    return InvalidArgument(absl::StrCat(name_, ": RecordStream on an unknown pointer"),
                           "a live pointer returned by Allocate");
  }
  if (stream != it->second->stream) it->second->other_streams.insert(stream);
  return absl::OkStatus();
}

void CachingAllocator::ReturnBlock(Block* block) {
  Pool& pool = PoolFor(block->small);
  auto mergeable = [](const Block* b) {
    return b != nullptr && !b->allocated && b->pending_events == 0;
  };
  if (mergeable(block->prev)) {
    Block* prev = block->prev;
    pool.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next != nullptr) block->next->prev = prev;
    delete block;
    block = prev;
  }
  if (mergeable(block->next)) {
    Block* next = block->next;
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next != nullptr) next->next->prev = block;
    delete next;
  }
  pool.insert(block);
}

void CachingAllocator::ProcessPendingEvents() {
  std::vector<Pending> still;
  for (Pending& p : pending_) {
    auto done = source_->EventDone(p.event);
    if (done.ok() && !*done) {
      still.push_back(p);
      continue;
    }
    source_->DestroyEvent(p.event);
    if (--p.block->pending_events == 0) ReturnBlock(p.block);
  }
  pending_.swap(still);
}

void CachingAllocator::ReleaseFreeSegments() {
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev == nullptr && b->next == nullptr) {  // a whole segment, free
        source_->Free(b->ptr);
        stats_.OnRelease(static_cast<int64_t>(b->segment_size));
        --num_segments_;
        delete b;
        it = pool->erase(it);
      } else {
        ++it;
      }
    }
  }
}

void CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  ProcessPendingEvents();
  ReleaseFreeSegments();
}

size_t CachingAllocator::CaptureHeldBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capture_held_bytes_;
}

int CachingAllocator::NumSegments() const {
  std::lock_guard<std::mutex> lock(mu_);
  return num_segments_;
}

}  // namespace weft
