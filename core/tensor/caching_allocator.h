// CachingAllocator: device memory reuse without returning to the driver.
//
// Memory comes from a DeviceMemorySource (cudaMalloc on CUDA, a fake in
// tests) in segments, and is handed out as blocks that are split and merged
// inside their segment. Each block belongs to the stream it was allocated
// on, and a freed block is only reused by that stream, so stream order alone
// makes reuse safe. A block that was also used on other streams
// (RecordStream) is held back until events recorded on those streams at Free
// time have completed. The host never waits in Allocate or Free.
//
// Graph capture (CUDA graphs): a graph replays its kernels at the addresses
// they had during capture, so memory a captured stream allocates must stay
// the graph's. A shared allocator refuses to allocate for a stream that is
// being captured, and keeps a block freed during capture out of circulation
// for good (the graph may still touch it); a private allocator
// (`capture_private`, one per graph, used by nothing else) serves captures.
//
// Size classes: requests round up to 512 B. Requests up to 1 MiB come from
// 2 MiB segments; larger ones from 20 MiB segments if under 10 MiB, else from
// a segment rounded up to 2 MiB. A free remainder is split off when it is at
// least 512 B (small pool) or over 1 MiB (large pool).
#ifndef WEFT_CORE_TENSOR_CACHING_ALLOCATOR_H_
#define WEFT_CORE_TENSOR_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/tensor/allocator.h"
#include "core/tensor/device_backend.h"

namespace weft {

// The raw device operations a CachingAllocator builds on.
class DeviceMemorySource {
 public:
  virtual ~DeviceMemorySource() = default;
  virtual absl::StatusOr<void*> Malloc(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  // An event marking all work queued on `stream` so far.
  virtual absl::StatusOr<NativeEvent> RecordEvent(NativeStream stream) = 0;
  virtual absl::StatusOr<bool> EventDone(NativeEvent event) = 0;
  virtual void DestroyEvent(NativeEvent event) = 0;
  virtual Device device() const = 0;
  // Whether work for `stream` from this thread would land in a graph being
  // captured: `stream` is being captured, or this thread has a capture open
  // (then every stream counts: a temporary on another stream that captured
  // work reads would be baked into the graph too).
  virtual bool Capturing(NativeStream stream) { return false; }
};

class CachingAllocator : public Allocator {
 public:
  static constexpr size_t kMinBlock = 512;
  static constexpr size_t kSmallMax = 1 << 20;         // 1 MiB
  static constexpr size_t kSmallSegment = 2 << 20;     // 2 MiB
  static constexpr size_t kLargeSegment = 20 << 20;    // 20 MiB
  static constexpr size_t kLargeSegmentMax = 10 << 20; // requests below share 20 MiB segments
  static constexpr size_t kRoundLarge = 2 << 20;

  CachingAllocator(std::string name, std::unique_ptr<DeviceMemorySource> source,
                   bool capture_private = false);
  ~CachingAllocator() override;

  absl::StatusOr<void*> Allocate(size_t bytes, NativeStream stream) override;
  void Free(void* ptr) override;
  absl::Status RecordStream(void* ptr, NativeStream stream) override;
  AllocatorStats Stats() const override { return stats_.Get(); }
  void ResetPeak() override { stats_.ResetPeak(); }
  Device device() const override { return source_->device(); }
  std::string Name() const override { return name_; }

  // Returns every fully free segment to the source. Blocks waiting on events
  // stay cached.
  void EmptyCache();
  // Number of segments held (for tests and the memory report).
  int NumSegments() const;
  // Bytes of blocks freed during a capture and kept out of circulation.
  size_t CaptureHeldBytes() const;

  static size_t RoundSize(size_t bytes);
  static size_t SegmentSize(size_t rounded);

 private:
  struct Block;
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockLess>;
  struct Pending {
    NativeEvent event;
    Block* block;
  };

  Pool& PoolFor(bool small) { return small ? small_pool_ : large_pool_; }
  Block* FindFree(Pool& pool, NativeStream stream, size_t size);
  absl::StatusOr<Block*> NewSegment(size_t size, NativeStream stream, bool small);
  void ReturnBlock(Block* block);  // marks free, merges neighbours, pools it
  void ProcessPendingEvents();
  void ReleaseFreeSegments();

  const std::string name_;
  std::unique_ptr<DeviceMemorySource> source_;
  const bool capture_private_;
  size_t capture_held_bytes_ = 0;
  mutable std::mutex mu_;
  StatsCounter stats_;
  Pool small_pool_;
  Pool large_pool_;
  absl::flat_hash_map<void*, Block*> active_;
  std::vector<Pending> pending_;
  int num_segments_ = 0;
};

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_CACHING_ALLOCATOR_H_
