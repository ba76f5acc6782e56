#include "strategies/cp/ring.h"

namespace weft::cp {

std::shared_ptr<comm::Work> Ring::Exchange(const Tensor& send, const Tensor& recv, int tag,
                                           NativeStream stream) {
  const int n = size();
  const comm::P2POp legs[2] = {
      {comm::P2POp::Type::kSend, send, (rank() + 1) % n, tag},
      {comm::P2POp::Type::kRecv, recv, (rank() - 1 + n) % n, tag},
  };
  return group_->BatchSendRecv(legs, {.tag = tag, .stream = stream});
}

int64_t Ring::bytes() const {
  const comm::CommStats s = group_->stats();
  return s[comm::OpKind::kSend].payload_bytes + s[comm::OpKind::kRecv].payload_bytes;
}

}  // namespace weft::cp
