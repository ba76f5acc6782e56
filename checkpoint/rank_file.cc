#include "checkpoint/rank_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "checkpoint/crc32c.h"
#include "core/base/errors.h"

namespace weft::ckpt {
namespace {

absl::Status WriteAll(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("writing ", path, ": ", std::strerror(errno),
                                              ". Hint: is the disk full?"));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Entry>> WriteRankFile(const std::string& path,
                                                 const std::string& file_name, int rank,
                                                 const std::vector<HostStatePiece>& pieces,
                                                 int64_t chunk_bytes, int64_t* bytes_written) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("creating ", path, ": ", std::strerror(errno)));
  }
  auto fail = [fd](absl::Status s) {
    ::close(fd);
    return s;
  };
  char header[kRankFileHeaderBytes] = {};
  std::memcpy(header, kRankFileMagic, sizeof(kRankFileMagic));
  const uint32_t version = 1, r = static_cast<uint32_t>(rank);
  std::memcpy(header + 8, &version, 4);
  std::memcpy(header + 12, &r, 4);
  if (absl::Status s = WriteAll(fd, header, sizeof(header), path); !s.ok()) return fail(s);
  int64_t offset = kRankFileHeaderBytes;
  std::vector<Entry> entries;
  std::map<std::string, size_t> index;
  static const char kZeros[64] = {};
  for (const HostStatePiece& hp : pieces) {
    const int64_t pad = (64 - offset % 64) % 64;
    if (absl::Status s = WriteAll(fd, kZeros, pad, path); !s.ok()) return fail(s);
    offset += pad;
    const int64_t length = static_cast<int64_t>(hp.host.nbytes());
    const uint8_t* data = static_cast<const uint8_t*>(hp.host.raw_data());
    if (absl::Status s = WriteAll(fd, data, length, path); !s.ok()) return fail(s);
    auto [it, fresh] = index.emplace(hp.info.name, entries.size());
    if (fresh) {
      Entry e;
      e.set_name(hp.info.name);
      for (int64_t d : hp.info.global_shape) e.add_global_shape(d);
      e.set_dtype(std::string(DTypeName(hp.host.dtype())));
      entries.push_back(std::move(e));
    }
    Piece* p = entries[it->second].add_pieces();
    p->set_file(file_name);
    p->set_offset(offset);
    p->set_length(length);
    for (int64_t d : hp.info.box_offsets) p->add_box_offsets(d);
    for (int64_t d : hp.info.box_shape) p->add_box_shape(d);
    p->set_begin(hp.info.begin);
    p->set_end(hp.info.end);
    p->set_replica(hp.info.replica);
    p->set_rank(rank);
    for (int c : hp.info.mesh_coords) p->add_mesh_coords(c);
    for (int64_t c = 0; c < length || (c == 0 && length == 0); c += chunk_bytes) {
      p->add_chunk_crc32c(Crc32c(data + c, static_cast<size_t>(std::min(chunk_bytes, length - c))));
      if (length == 0) break;
    }
    offset += length;
  }
  if (::fsync(fd) != 0) {
    return fail(absl::InternalError(absl::StrCat("fsync of ", path, ": ", std::strerror(errno))));
  }
  if (::close(fd) != 0) {
    return absl::InternalError(absl::StrCat("closing ", path, ": ", std::strerror(errno)));
  }
  *bytes_written = offset;
  return entries;
}

PieceReader::~PieceReader() {
  for (auto& [name, fd] : fds_) ::close(fd);
}

absl::StatusOr<int> PieceReader::Open(const std::string& file) {
  auto it = fds_.find(file);
  if (it != fds_.end()) return it->second;
  const std::string path = absl::StrCat(dir_, "/", file);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return NotFound(absl::StrCat("checkpoint data file ", path, ": ", std::strerror(errno)),
                    "every rank's data file next to metadata.pb",
                    "copy the whole step directory, not only some files");
  }
  char header[kRankFileHeaderBytes];
  if (::pread(fd, header, sizeof(header), 0) != static_cast<ssize_t>(sizeof(header)) ||
      std::memcmp(header, kRankFileMagic, sizeof(kRankFileMagic)) != 0) {
    ::close(fd);
    return InvalidArgument(absl::StrCat(path, " does not start with the magic \"WEFTCKPT\""),
                           "a weft checkpoint data file", "the file is corrupt or not weft's");
  }
  fds_[file] = fd;
  return fd;
}

absl::Status PieceReader::Read(const std::string& name, const Piece& piece, int64_t from,
                               int64_t to, uint8_t* out) {
  absl::StatusOr<const uint8_t*> bytes = View(name, piece, from, to);
  if (!bytes.ok()) return bytes.status();
  std::memcpy(out, *bytes, static_cast<size_t>(to - from));
  return absl::OkStatus();
}

absl::StatusOr<const uint8_t*> PieceReader::View(const std::string& name, const Piece& piece,
                                                 int64_t from, int64_t to) {
  if (from < 0 || to > piece.length() || from > to) {
    return Internal(absl::StrCat("read of bytes [", from, ", ", to, ") of a ", piece.length(),
                                 "-byte piece of ", name));
  }
  if (from == to) return scratch_.data();
  absl::StatusOr<int> fd = Open(piece.file());
  if (!fd.ok()) return fd.status();
  const int64_t c0 = from / chunk_bytes_, c1 = (to - 1) / chunk_bytes_;
  if (c1 >= piece.chunk_crc32c_size()) {
    return InvalidArgument(absl::StrCat("entry ", name, " in ", piece.file(), ": ",
                                        piece.chunk_crc32c_size(), " chunk checksums for ",
                                        piece.length(), " bytes"),
                           "one checksum per chunk", "metadata.pb is corrupt");
  }
  const int64_t lo = c0 * chunk_bytes_, hi = std::min((c1 + 1) * chunk_bytes_, piece.length());
  scratch_.resize(static_cast<size_t>(hi - lo));
  int64_t got = 0;
  while (got < hi - lo) {
    const ssize_t r = ::pread(*fd, scratch_.data() + got, static_cast<size_t>(hi - lo - got),
                              piece.offset() + lo + got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      return absl::DataLossError(absl::StrCat(
          "entry ", name, ": ", piece.file(), " ends before byte ", piece.offset() + hi,
          " (the piece is at offset ", piece.offset(), ", ", piece.length(),
          " bytes); the file is truncated. Hint: the checkpoint was copied incompletely or the "
          "disk filled up; resume from an earlier step"));
    }
    got += r;
  }
  bytes_read_ += hi - lo;
  for (int64_t c = c0; c <= c1; ++c) {
    const int64_t a = c * chunk_bytes_ - lo;
    const int64_t n = std::min(chunk_bytes_, piece.length() - c * chunk_bytes_);
    const uint32_t crc = Crc32c(scratch_.data() + a, static_cast<size_t>(n));
    if (crc != piece.chunk_crc32c(static_cast<int>(c))) {
      return absl::DataLossError(absl::StrCat(
          "entry ", name, ": checksum mismatch in ", piece.file(), " at bytes [",
          piece.offset() + c * chunk_bytes_, ", ", piece.offset() + c * chunk_bytes_ + n,
          ") (CRC-32C ", crc, ", metadata says ", piece.chunk_crc32c(static_cast<int>(c)),
          "). Hint: the file is corrupt; resume from an earlier step"));
    }
  }
  return scratch_.data() + (from - lo);
}

}  // namespace weft::ckpt
