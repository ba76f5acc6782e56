#include "comm/store/tcp_store_wire.h"

namespace weft::comm::wire {
namespace {

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

}  // namespace

void Writer::I64(int64_t v) { PutLe(&out_, static_cast<uint64_t>(v), 8); }

void Writer::Str(absl::string_view s) {
  PutLe(&out_, s.size(), 4);
  out_.append(s.data(), s.size());
}

std::string Writer::Frame() const {
  std::string frame;
  frame.reserve(4 + out_.size());
  PutLe(&frame, out_.size(), 4);
  frame += out_;
  return frame;
}

bool Reader::U8(uint8_t* v) {
  if (in_.empty()) return false;
  *v = static_cast<uint8_t>(in_[0]);
  in_.remove_prefix(1);
  return true;
}

bool Reader::I64(int64_t* v) {
  if (in_.size() < 8) return false;
  *v = static_cast<int64_t>(GetLe(in_.data(), 8));
  in_.remove_prefix(8);
  return true;
}

bool Reader::Str(std::string* s) {
  if (in_.size() < 4) return false;
  const uint64_t n = GetLe(in_.data(), 4);
  in_.remove_prefix(4);
  if (in_.size() < n) return false;
  s->assign(in_.data(), n);
  in_.remove_prefix(n);
  return true;
}

uint32_t DecodeLength(const char header[4]) { return static_cast<uint32_t>(GetLe(header, 4)); }

}  // namespace weft::comm::wire
