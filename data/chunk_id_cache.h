// EncodeChunksCached: the shared loop of the byte-level BPE tokenizers.
// Text is cut into chunks (the tokenizer's pre-tokenization rule) and each
// chunk encoded on its own; natural text repeats its words, so a chunk seen
// earlier in the call copies its ids from where they were first written:
// the first occurrence doubles as the cache entry, and hits copy without
// allocating. One-byte chunks skip the cache (encoding them is a lookup).
#ifndef WEFT_DATA_CHUNK_ID_CACHE_H_
#define WEFT_DATA_CHUNK_ID_CACHE_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace weft::data {

// More distinct chunks than this in one call start the cache afresh.
inline constexpr size_t kMaxChunkCacheEntries = 1 << 20;

// chunk_end(text, pos) -> end of the chunk at pos; encode(chunk, ids)
// appends its ids.
template <typename ChunkEnd, typename EncodeChunk>
void EncodeChunksCached(absl::string_view text, ChunkEnd chunk_end, EncodeChunk encode,
                        std::vector<int32_t>* ids) {
  absl::flat_hash_map<absl::string_view, std::pair<size_t, uint32_t>> cache;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = chunk_end(text, pos);
    const absl::string_view chunk = text.substr(pos, end - pos);
    pos = end;
    if (chunk.size() == 1) {
      encode(chunk, ids);
      continue;
    }
    const auto it = cache.find(chunk);
    if (it != cache.end()) {
      const auto [offset, length] = it->second;
      const size_t old = ids->size();
      ids->resize(old + length);
      std::copy_n(ids->data() + offset, length, ids->data() + old);
      continue;
    }
    const size_t offset = ids->size();
    encode(chunk, ids);
    if (cache.size() >= kMaxChunkCacheEntries) cache.clear();
    cache.emplace(chunk, std::make_pair(offset, static_cast<uint32_t>(ids->size() - offset)));
  }
}

}  // namespace weft::data

#endif  // WEFT_DATA_CHUNK_ID_CACHE_H_
