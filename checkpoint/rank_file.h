// A rank's data file: a 64-byte header (magic "WEFTCKPT", version, rank),
// then the raw bytes of each of the rank's pieces, each starting at a
// 64-byte boundary. Everything else (names, shapes, where each piece is,
// checksums) lives in the step's metadata.pb.
#ifndef WEFT_CHECKPOINT_RANK_FILE_H_
#define WEFT_CHECKPOINT_RANK_FILE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/checkpoint.pb.h"
#include "core/parallel/sharding_export.h"
#include "core/tensor/tensor.h"

namespace weft::ckpt {

inline constexpr int64_t kRankFileHeaderBytes = 64;
inline constexpr char kRankFileMagic[8] = {'W', 'E', 'F', 'T', 'C', 'K', 'P', 'T'};

// One piece ready to write: its geometry and a contiguous host tensor.
struct HostStatePiece {
  PieceInfo info;
  Tensor host;
};

// Writes `pieces` to `path` (created or truncated) and fsyncs it. Returns
// one Entry per name with this rank's pieces, offsets and chunk checksums.
absl::StatusOr<std::vector<Entry>> WriteRankFile(const std::string& path, const std::string& file_name,
                                                 int rank, const std::vector<HostStatePiece>& pieces,
                                                 int64_t chunk_bytes, int64_t* bytes_written);

// Reads pieces' bytes from the data files of one checkpoint directory,
// verifying every chunk it touches. Opened files stay open until it dies.
class PieceReader {
 public:
  PieceReader(std::string dir, int64_t chunk_bytes) : dir_(std::move(dir)), chunk_bytes_(chunk_bytes) {}
  ~PieceReader();
  PieceReader(const PieceReader&) = delete;
  PieceReader& operator=(const PieceReader&) = delete;

  // Bytes [from, to) of `piece` (entry `name`) into `out`. Reads the whole
  // chunks around the range and checks their CRC-32C; a mismatch or a short
  // file is an error naming the entry and the file.
  absl::Status Read(const std::string& name, const Piece& piece, int64_t from, int64_t to, uint8_t* out);
  // The same bytes without the copy: valid until the next call.
  absl::StatusOr<const uint8_t*> View(const std::string& name, const Piece& piece, int64_t from,
                                      int64_t to);
  int64_t bytes_read() const { return bytes_read_; }

 private:
  absl::StatusOr<int> Open(const std::string& file);

  std::string dir_;
  int64_t chunk_bytes_;
  std::map<std::string, int> fds_;
  std::vector<uint8_t> scratch_;
  int64_t bytes_read_ = 0;
};

}  // namespace weft::ckpt

#endif  // WEFT_CHECKPOINT_RANK_FILE_H_
