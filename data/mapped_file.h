// MappedFile: a read-only memory map of a whole file.
//
// Token shards are read through mmap so that opening a multi-GB corpus costs
// nothing up front and the page cache is shared by every worker thread and
// every process on the node (ranks of one job read the same shards).
#ifndef WEFT_DATA_MAPPED_FILE_H_
#define WEFT_DATA_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace weft::data {

class MappedFile {
 public:
  // Maps `path` read-only. An empty file maps to data() == nullptr, size() 0.
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  void Unmap();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace weft::data

#endif  // WEFT_DATA_MAPPED_FILE_H_
