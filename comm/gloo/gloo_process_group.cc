#include "comm/gloo/gloo_process_group.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/gloo/peer_directory.h"
#include "comm/gloo/reduce_kernels.h"
#include "comm/gloo/store_adapter.h"
#include "comm/util/deadline.h"
#include "core/base/errors.h"
#include "core/base/fnv1a.h"

namespace weft::comm {
namespace {

using gloo_internal::ReduceBlocks;

// Slot prefix for point-to-point ops; gloo's collectives use 0x01..0x0b.
constexpr uint8_t kP2PSlotPrefix = 0x7e;

// gloo writes with writev(2), which raises SIGPIPE when a peer has died and
// would kill this process before the error could be reported. Ignore it
// unless the program installed its own handler.
void IgnoreSigpipeUnlessHandled() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
}

std::chrono::milliseconds GlooTimeout(const Deadline& deadline) {
  return std::chrono::milliseconds(std::max<int64_t>(1, deadline.RemainingMillis()));
}

std::chrono::milliseconds GlooTimeout(absl::Duration d) {
  return GlooTimeout(Deadline::After(d));
}

// gloo wants a non-null pointer even for empty buffers.
uint8_t* Bytes(void* p) {
  static uint8_t dummy[8];
  return p != nullptr ? static_cast<uint8_t*>(p) : dummy;
}

bool Overlaps(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const char*>(a.raw_data());
  const auto* pb = static_cast<const char*>(b.raw_data());
  if (a.nbytes() == 0 || b.nbytes() == 0) return false;
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

// Near-equal split of `numel` over n ranks: the first numel % n get one more.
std::vector<int64_t> EvenCounts(int64_t numel, int n) {
  std::vector<int64_t> counts(n, numel / n);
  for (int r = 0; r < numel % n; ++r) ++counts[r];
  return counts;
}

// gloo's slot tag: the sequence number in the low 20 bits (unique among
// the ops in flight), a hash of the op's fingerprint (op, dtype, sizes: what
// every rank must agree on) in the high 12. Ranks that issue different
// collectives at the same point then wait on different slots and time out
// with weft's error naming each rank's op and sizes; with equal tags gloo
// aborted the process on mismatched sizes (SIGABRT in its own thread).
// FNV-1a: the same on every rank and build, unlike a seeded hash.
uint32_t Tag(const OpInfo& info) {
  const uint64_t h = Fnv1a(info.fingerprint.data(), info.fingerprint.size());
  return (static_cast<uint32_t>(info.seq) & 0xFFFFFu) | static_cast<uint32_t>(h >> 52) << 20;
}

// "[./gloo/transport/tcp/pair.cc:598] Connection closed" -> "Connection closed"
std::string StripGlooLocation(const std::string& what) {
  if (absl::StartsWith(what, "[./gloo") || absl::StartsWith(what, "[gloo")) {
    const size_t end = what.find("] ");
    if (end != std::string::npos) return what.substr(end + 2);
  }
  return what;
}

}  // namespace

GlooProcessGroup::GlooProcessGroup(int rank, int size, const ProcessGroupOptions& options)
    : ProcessGroup("gloo", options.name, rank, size, Device::Cpu(), options.timeout),
      check_consistency_(options.check_consistency),
      executor_(std::make_unique<gloo_internal::SerialExecutor>()) {}

GlooProcessGroup::~GlooProcessGroup() {
  executor_.reset();  // finish queued ops while the context still exists
}

// "rank 0 10.0.0.1, rank 1 127.0.1.1" from what the ranks published; ranks
// that have not published yet are "?".
static std::string AdvertisedAddresses(Store& store, int size) {
  std::string out;
  for (int r = 0; r < size; ++r) {
    const std::string key = absl::StrCat("gloo_address/", r);
    absl::StatusOr<bool> there = store.Check({key});
    absl::StatusOr<std::string> a =
        there.ok() && *there ? store.Get(key, absl::Milliseconds(200)) : absl::NotFoundError("");
    absl::StrAppend(&out, r == 0 ? "" : ", ", "rank ", r, " ", a.ok() ? *a : "?");
  }
  return out;
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> GlooProcessGroup::Create(
    std::shared_ptr<Store> store, int rank, int size, const ProcessGroupOptions& options) {
  std::shared_ptr<GlooProcessGroup> group(new GlooProcessGroup(rank, size, options));
  if (size == 1) return group;
  IgnoreSigpipeUnlessHandled();
  ::gloo::transport::tcp::attr attr;
  if (!options.gloo.iface.empty()) {
    attr.iface = options.gloo.iface;
  } else {
    attr.hostname = options.gloo.hostname.empty() ? "127.0.0.1" : options.gloo.hostname;
  }
  if (absl::Status s = gloo_internal::PeerDirectory::Publish(*store, rank); !s.ok()) {
    return Annotate(s, absl::StrCat("rank ", rank, " joining group '", options.name, "'"));
  }
  const std::string advertised = !attr.iface.empty() ? "interface " + attr.iface : attr.hostname;
  // So that a failed connection can say what every rank advertised.
  (void)store->Set(absl::StrCat("gloo_address/", rank), advertised);
  try {
    auto device = ::gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<::gloo::rendezvous::Context>(rank, size);
    context->setTimeout(GlooTimeout(options.timeout));
    GlooStoreAdapter adapter(store, options.timeout);
    context->connectFullMesh(adapter, device);
    group->context_ = std::move(context);
  } catch (const std::exception& e) {
    const std::string what = StripGlooLocation(e.what());
    const std::string endpoint = !attr.iface.empty() ? "interface " + attr.iface
                                                     : "host " + attr.hostname;
    if (absl::StrContains(what, "timed out") || absl::StrContains(what, "Timed out")) {
      return DeadlineExceeded(
          absl::StrCat("rank ", rank, " could not connect the ", size, " ranks of group '",
                       options.name, "' within ", absl::FormatDuration(options.timeout), ": ",
                       what),
          "every rank of the group to create it with the same name and size",
          "a rank may have crashed or not started, or may be creating its groups in a "
          "different order; store keys are the ranks' numbers");
    }
    return Unavailable(
        absl::StrCat("rank ", rank, " failed to set up gloo on ", endpoint, " for group '",
                     options.name, "': ", what, "; advertised addresses: ",
                     AdvertisedAddresses(*store, size)),
        "an address of every rank that every other rank can reach",
        "a loopback address (127.x) in a multi-host job means the host name resolved to "
        "loopback: choose the interface with --gloo_iface=IFACE or GLOO_SOCKET_IFNAME=IFACE "
        "(by default weft uses the interface that routes to MASTER_ADDR)");
  }
  group->peers_ = gloo_internal::PeerDirectory::Collect(*store, rank, size);
  for (int r = 0; r < size; ++r) {
    absl::StatusOr<std::string> a =
        store->Get(absl::StrCat("gloo_address/", r), absl::Seconds(1));
    group->advertised_.push_back(a.ok() ? *a : "");
  }
  return group;
}

absl::Status GlooProcessGroup::TranslateException(const OpInfo& info,
                                                  const std::exception& e) const {
  const std::string what = StripGlooLocation(e.what());
  const int peer = peers_.FindPeer(what);
  absl::StatusCode code = absl::StatusCode::kInternal;
  if (absl::StrContains(what, "Timed out") || absl::StrContains(what, "timed out")) {
    code = absl::StatusCode::kDeadlineExceeded;
    if (peer < 0) {
      // A timeout names no socket. Across hosts the likely culprits are the
      // ranks behind another address (a cut link, a dead host): name them.
      const std::string& mine = advertised_.empty() ? "" : advertised_[rank()];
      std::string remote;
      for (int r = 0; r < static_cast<int>(advertised_.size()); ++r) {
        if (r == rank() || advertised_[r].empty() || advertised_[r] == mine) continue;
        absl::StrAppend(&remote, remote.empty() ? "" : ", ", "rank ", r, " at ", advertised_[r]);
      }
      if (!remote.empty()) {
        return info.Error(code,
                          absl::StrCat(what, "; no answer from the peers on other hosts (",
                                       remote, ") or from a rank on this host"),
                          peer);
      }
    }
  } else if (dynamic_cast<const ::gloo::IoException*>(&e) != nullptr) {
    code = absl::StatusCode::kUnavailable;
  }
  if (peer < 0) {
    // No one peer to blame, but the ranks gone from this host are news.
    const std::vector<int> exited = peers_.ExitedPeers();
    if (!exited.empty()) {
      return info.Error(code, absl::StrCat(what, "; rank", exited.size() > 1 ? "s " : " ",
                                           absl::StrJoin(exited, ", "),
                                           " on this host exited"),
                        peer);
    }
  }
  return info.Error(code, what, peer);
}

std::shared_ptr<Work> GlooProcessGroup::Enqueue(const OpContext& ctx,
                                                std::function<absl::Status(const OpInfo&)> body) {
  auto work = std::make_shared<HostWork>(ctx.info, health_state());
  executor_->Submit([this, work, info = ctx.info, body = std::move(body)]() mutable {
    if (absl::Status h = health(); !h.ok()) {
      body = nullptr;
      work->Complete(Annotate(
          h, absl::StrCat(info.Describe(), " not started because the group broke earlier")));
      return;
    }
    work->MarkStarted();
    absl::Status s;
    try {
      if (check_consistency_ && !info.point_to_point && size() > 1) s = CheckConsistency(info);
      if (s.ok()) s = body(info);
    } catch (const std::exception& e) {
      s = TranslateException(info, e);
    }
    if (!s.ok()) MarkBroken(s);
    // Drop the op's tensors before waking the waiter, which may free them
    // and allocate again at once: memory then peaks where the caller's
    // code says, not when this thread gets around to it.
    body = nullptr;
    work->Complete(std::move(s));
  });
  return work;
}

absl::Status GlooProcessGroup::CheckConsistency(const OpInfo& info) {
  constexpr size_t kFingerprintBytes = 160;
  const std::string mine = absl::StrCat("#", info.seq, " ", info.fingerprint);
  std::vector<char> local(kFingerprintBytes, '\0');
  std::memcpy(local.data(), mine.data(), std::min(mine.size(), kFingerprintBytes - 1));
  std::vector<char> all(kFingerprintBytes * size());
  ::gloo::AllgatherOptions ag(context_);
  ag.setInput(local.data(), local.size());
  ag.setOutput(all.data(), all.size());
  // The sequence number alone: the ranks' fingerprints, hence their Tags,
  // may differ, which is what this exchange is there to show.
  ag.setTag(static_cast<uint32_t>(info.seq) & 0xFFFFFu);
  ag.setTimeout(GlooTimeout(info.timeout));
  ::gloo::allgather(ag);
  std::string views;
  bool agree = true;
  for (int r = 0; r < size(); ++r) {
    const std::string theirs(all.data() + r * kFingerprintBytes);
    agree &= theirs == std::string(local.data());
    absl::StrAppend(&views, r == 0 ? "" : "; ", "rank ", r, ": ", theirs);
  }
  if (agree) return absl::OkStatus();
  return info.Error(absl::StatusCode::kFailedPrecondition,
                    absl::StrCat("ranks disagree on this collective: ", views));
}

void GlooProcessGroup::ReduceScatterInto(const OpInfo& info, const Tensor& input,
                                         const std::vector<int64_t>& counts, ReduceOp op,
                                         void* out) {
  const int n = size();
  const size_t esize = DTypeSize(input.dtype());
  const int64_t mine = counts[rank()];
  std::vector<uint8_t> blocks(static_cast<size_t>(n * mine) * esize);
  const bool even = std::all_of(counts.begin(), counts.end(),
                                [&](int64_t c) { return c == counts[0]; });
  if (even) {
    ::gloo::AlltoallOptions a2a(context_);
    a2a.setInput(Bytes(input.raw_data()), input.nbytes());
    a2a.setOutput(Bytes(blocks.data()), blocks.size());
    a2a.setTag(Tag(info));
    a2a.setTimeout(GlooTimeout(info.timeout));
    ::gloo::alltoall(a2a);
  } else {
    std::vector<int64_t> send_bytes, recv_bytes(n, mine * static_cast<int64_t>(esize));
    for (int64_t c : counts) send_bytes.push_back(c * static_cast<int64_t>(esize));
    ::gloo::AlltoallvOptions a2av(context_);
    a2av.setInput(Bytes(input.raw_data()), send_bytes);
    a2av.setOutput(Bytes(blocks.data()), recv_bytes);
    a2av.setTag(Tag(info));
    a2av.setTimeout(GlooTimeout(info.timeout));
    ::gloo::alltoallv(a2av);
  }
  ReduceBlocks(input.dtype(), op, blocks.data(), n, mine, out);
}

std::shared_ptr<Work> GlooProcessGroup::DoAllReduce(const OpContext& ctx, const Tensor& tensor,
                                                    ReduceOp op) {
  return Enqueue(ctx, [this, tensor, op](const OpInfo& info) {
    const int n = size();
    // One rank: the sum (or avg, max, min) of one value is the value.
    if (n == 1 || tensor.numel() == 0) return absl::OkStatus();
    const size_t esize = DTypeSize(tensor.dtype());
    const std::vector<int64_t> counts = EvenCounts(tensor.numel(), n);
    std::vector<uint8_t> mine(static_cast<size_t>(counts[rank()]) * esize);
    ReduceScatterInto(info, tensor, counts, op, mine.data());
    std::vector<size_t> part_bytes;
    for (int64_t c : counts) part_bytes.push_back(static_cast<size_t>(c) * esize);
    ::gloo::AllgathervOptions ag(context_);
    ag.setInput(Bytes(mine.data()), mine.size());
    ag.setOutput(Bytes(tensor.raw_data()), part_bytes);
    ag.setTag(Tag(info));
    ag.setTimeout(GlooTimeout(info.timeout));
    ::gloo::allgatherv(ag);
    return absl::OkStatus();
  });
}

std::shared_ptr<Work> GlooProcessGroup::DoReduceScatter(const OpContext& ctx,
                                                        const Tensor& input,
                                                        const Tensor& output, ReduceOp op) {
  return Enqueue(ctx, [this, input, output, op](const OpInfo& info) {
    if (output.numel() == 0) return absl::OkStatus();
    if (size() == 1) {
      ReduceBlocks(input.dtype(), op, input.raw_data(), 1, output.numel(), output.raw_data());
      return absl::OkStatus();
    }
    ReduceScatterInto(info, input, std::vector<int64_t>(size(), output.numel()), op,
                      output.raw_data());
    return absl::OkStatus();
  });
}

std::shared_ptr<Work> GlooProcessGroup::DoAllGather(const OpContext& ctx, const Tensor& input,
                                                    const Tensor& output) {
  return Enqueue(ctx, [this, input, output](const OpInfo& info) {
    if (input.nbytes() == 0) return absl::OkStatus();
    if (size() == 1) {
      std::memmove(output.raw_data(), input.raw_data(), input.nbytes());
      return absl::OkStatus();
    }
    // In-place use (input is this rank's block of output) is allowed:
    // stage the input so gloo never reads what it is writing.
    std::vector<uint8_t> staged;
    void* in = input.raw_data();
    if (Overlaps(input, output)) {
      staged.assign(static_cast<uint8_t*>(in), static_cast<uint8_t*>(in) + input.nbytes());
      in = staged.data();
    }
    ::gloo::AllgatherOptions ag(context_);
    ag.setInput(Bytes(in), input.nbytes());
    ag.setOutput(Bytes(output.raw_data()), output.nbytes());
    ag.setTag(Tag(info));
    ag.setTimeout(GlooTimeout(info.timeout));
    ::gloo::allgather(ag);
    return absl::OkStatus();
  });
}

std::shared_ptr<Work> GlooProcessGroup::DoAllGatherV(const OpContext& ctx, const Tensor& input,
                                                     std::vector<Tensor> outputs) {
  return Enqueue(ctx, [this, input, outputs = std::move(outputs)](const OpInfo& info) {
    std::vector<size_t> part_bytes;
    size_t total = 0;
    for (const Tensor& t : outputs) {
      part_bytes.push_back(t.nbytes());
      total += t.nbytes();
    }
    if (total == 0) return absl::OkStatus();
    std::vector<uint8_t> flat(total);
    if (size() == 1) {
      std::memcpy(flat.data(), input.raw_data(), input.nbytes());
    } else {
      ::gloo::AllgathervOptions ag(context_);
      ag.setInput(Bytes(input.raw_data()), input.nbytes());
      ag.setOutput(Bytes(flat.data()), part_bytes);
      ag.setTag(Tag(info));
      ag.setTimeout(GlooTimeout(info.timeout));
      ::gloo::allgatherv(ag);
    }
    size_t offset = 0;
    for (const Tensor& t : outputs) {
      if (t.nbytes() > 0) std::memcpy(t.raw_data(), flat.data() + offset, t.nbytes());
      offset += t.nbytes();
    }
    return absl::OkStatus();
  });
}

std::shared_ptr<Work> GlooProcessGroup::DoBroadcast(const OpContext& ctx, const Tensor& tensor,
                                                    int root) {
  return Enqueue(ctx, [this, tensor, root](const OpInfo& info) {
    if (size() == 1 || tensor.nbytes() == 0) return absl::OkStatus();
    ::gloo::BroadcastOptions bc(context_);
    bc.setOutput(Bytes(tensor.raw_data()), tensor.nbytes());
    bc.setRoot(root);
    bc.setTag(Tag(info));
    bc.setTimeout(GlooTimeout(info.timeout));
    ::gloo::broadcast(bc);
    return absl::OkStatus();
  });
}

std::shared_ptr<Work> GlooProcessGroup::DoAllToAllV(const OpContext& ctx, const Tensor& input,
                                                    std::vector<int64_t> input_counts,
                                                    const Tensor& output,
                                                    std::vector<int64_t> output_counts) {
  return Enqueue(ctx, [this, input, output, in_counts = std::move(input_counts),
                       out_counts = std::move(output_counts)](const OpInfo& info) {
    if (size() == 1) {
      if (input.nbytes() > 0) std::memmove(output.raw_data(), input.raw_data(), input.nbytes());
      return absl::OkStatus();
    }
    std::vector<uint8_t> staged;
    void* in = input.raw_data();
    if (Overlaps(input, output)) {
      staged.assign(static_cast<uint8_t*>(in), static_cast<uint8_t*>(in) + input.nbytes());
      in = staged.data();
    }
    const auto esize = static_cast<int64_t>(DTypeSize(input.dtype()));
    const bool even =
        in_counts == out_counts &&
        std::all_of(in_counts.begin(), in_counts.end(), [&](int64_t c) { return c == in_counts[0]; });
    if (even) {
      ::gloo::AlltoallOptions a2a(context_);
      a2a.setInput(Bytes(in), input.nbytes());
      a2a.setOutput(Bytes(output.raw_data()), output.nbytes());
      a2a.setTag(Tag(info));
      a2a.setTimeout(GlooTimeout(info.timeout));
      ::gloo::alltoall(a2a);
      return absl::OkStatus();
    }
    std::vector<int64_t> send_bytes, recv_bytes;
    for (int64_t c : in_counts) send_bytes.push_back(c * esize);
    for (int64_t c : out_counts) recv_bytes.push_back(c * esize);
    ::gloo::AlltoallvOptions a2av(context_);
    a2av.setInput(Bytes(in), send_bytes);
    a2av.setOutput(Bytes(output.raw_data()), recv_bytes);
    a2av.setTag(Tag(info));
    a2av.setTimeout(GlooTimeout(info.timeout));
    ::gloo::alltoallv(a2av);
    return absl::OkStatus();
  });
}

std::shared_ptr<Work> GlooProcessGroup::DoBatchSendRecv(const OpContext& ctx,
                                                        std::vector<P2POp> ops) {
  return Enqueue(ctx, [this, ops = std::move(ops)](const OpInfo& info) {
    const Deadline deadline = Deadline::After(info.timeout);
    std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>> buffers;
    // Post every leg before waiting on any, so exchanges cannot deadlock.
    for (const P2POp& op : ops) {
      buffers.push_back(
          context_->createUnboundBuffer(Bytes(op.tensor.raw_data()), op.tensor.nbytes()));
      const uint64_t slot = ::gloo::Slot::build(kP2PSlotPrefix, static_cast<uint32_t>(op.tag));
      if (op.type == P2POp::Type::kSend) {
        buffers.back()->send(op.peer, slot);
      } else {
        buffers.back()->recv(op.peer, slot);
      }
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      const bool is_send = ops[i].type == P2POp::Type::kSend;
      bool completed = false;
      try {
        completed = is_send ? buffers[i]->waitSend(GlooTimeout(deadline))
                            : buffers[i]->waitRecv(GlooTimeout(deadline));
      } catch (const std::exception& e) {
        // Legs may still be registered with gloo's transport: keep their
        // memory alive until the group is gone rather than risk a late write.
        abandoned_.push_back({std::move(buffers), ops});
        return info.Error(TranslateException(info, e).code(),
                          StripGlooLocation(e.what()), ops[i].peer);
      }
      if (!completed) {
        abandoned_.push_back({std::move(buffers), ops});
        return info.Error(absl::StatusCode::kAborted,
                          absl::StrCat(is_send ? "send" : "recv", " was aborted"), ops[i].peer);
      }
    }
    return absl::OkStatus();
  });
}

std::shared_ptr<Work> GlooProcessGroup::DoBarrier(const OpContext& ctx) {
  return Enqueue(ctx, [this](const OpInfo& info) {
    if (size() == 1) return absl::OkStatus();
    ::gloo::BarrierOptions barrier(context_);
    barrier.setTag(Tag(info));
    barrier.setTimeout(GlooTimeout(info.timeout));
    ::gloo::barrier(barrier);
    return absl::OkStatus();
  });
}

}  // namespace weft::comm
