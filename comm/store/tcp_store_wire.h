// The TCP store's wire format, shared by client and server.
//
// Every message is a frame: a little-endian uint32 payload length, then the
// payload. A request payload is a Command byte followed by its fields; a
// reply payload is a ReplyCode byte followed by its fields. Strings are a
// uint32 length plus bytes; integers are little-endian int64.
//
//   kHello       magic, version, world_size, rank, token -> kOk | kError(msg)
//   kSet         key, value                            -> kOk
//   kGet         key, timeout_ms                       -> kOk(value) | kTimeout(missing)
//   kAdd         key, delta                            -> kOk(int) | kError(msg)
//   kCompareSet  key, expected, desired                -> kOk(value)
//   kWait        n, key*n, timeout_ms                  -> kOk | kTimeout(missing)
//   kCheck       n, key*n                              -> kOk(int 0/1)
//   kDelete      key                                   -> kOk(int 0/1)
//   kNumKeys                                           -> kOk(int)
// A kTimeout reply carries n and the missing keys. Blocking requests carry
// their timeout so the server answers them itself; the connection then stays
// in step with the client even when a wait expires.
#ifndef WEFT_COMM_STORE_TCP_STORE_WIRE_H_
#define WEFT_COMM_STORE_TCP_STORE_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace weft::comm::wire {

inline constexpr int64_t kMagic = 0x77656674'73746f72;  // "weftstor"
inline constexpr int64_t kVersion = 2;
// Frames larger than this are a protocol error (a stray client, not a value).
inline constexpr uint32_t kMaxFrameBytes = 1u << 30;
// Before its hello a connection may send no more than this: a stranger
// cannot make the server buffer large frames.
inline constexpr uint32_t kMaxHelloBytes = 4096;
// The environment variable holding the job's store token (the launcher
// makes one per job; every rank's hello must carry it).
inline constexpr char kTokenEnv[] = "WEFT_STORE_TOKEN";

enum class Command : uint8_t {
  kHello = 1,
  kSet,
  kGet,
  kAdd,
  kCompareSet,
  kWait,
  kCheck,
  kDelete,
  kNumKeys,
};

enum class ReplyCode : uint8_t { kOk = 0, kTimeout = 1, kError = 2 };

class Writer {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void I64(int64_t v);
  void Str(absl::string_view s);
  // The payload with its length prefix, ready to send.
  std::string Frame() const;
  const std::string& payload() const { return out_; }

 private:
  std::string out_;
};

// Reads fields from a payload; every getter returns false on underflow.
class Reader {
 public:
  explicit Reader(absl::string_view in) : in_(in) {}
  bool U8(uint8_t* v);
  bool I64(int64_t* v);
  bool Str(std::string* s);
  bool done() const { return in_.empty(); }

 private:
  absl::string_view in_;
};

// Decodes the little-endian length prefix of a frame.
uint32_t DecodeLength(const char header[4]);

}  // namespace weft::comm::wire

#endif  // WEFT_COMM_STORE_TCP_STORE_WIRE_H_
