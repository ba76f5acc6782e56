#include "comm/process_group/process_group.h"

#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/process_group/collective_fault.h"
#include "comm/process_group/flight_recorder.h"
#include "core/base/errors.h"

namespace weft::comm {
namespace {

// "f32[2, 3]"
std::string TensorString(const Tensor& t) {
  return absl::StrCat(DTypeName(t.dtype()), ShapeString(t.shape()));
}

int64_t Bytes(const Tensor& t) { return static_cast<int64_t>(t.nbytes()); }

bool IsIntegral(DType dtype) { return dtype == DType::kI32 || dtype == DType::kI64; }

absl::Status CheckReducible(DType dtype, ReduceOp op) {
  if (dtype == DType::kU16) {
    return InvalidArgument("cannot reduce a u16 tensor (raw 16-bit storage)",
                           "f32, bf16, f16, i32 or i64",
                           "view the data as bf16/f16 if it holds floats");
  }
  if (op == ReduceOp::kAvg && IsIntegral(dtype)) {
    return InvalidArgument(absl::StrCat("ReduceOp avg on an integer tensor (",
                                        DTypeName(dtype), ")"),
                           "a floating-point dtype for avg",
                           "reduce with sum and divide with the rounding you need");
  }
  return absl::OkStatus();
}

absl::Status SameDType(const Tensor& a, const Tensor& b, absl::string_view what) {
  if (a.dtype() == b.dtype()) return absl::OkStatus();
  return InvalidArgument(absl::StrCat(what, ": dtypes differ (", DTypeName(a.dtype()), " vs ",
                                      DTypeName(b.dtype()), ")"),
                         "one dtype for input and output");
}

}  // namespace

ProcessGroup::ProcessGroup(std::string backend, std::string name, int rank, int size,
                           Device device, absl::Duration timeout)
    : backend_(std::move(backend)),
      name_(std::move(name)),
      rank_(rank),
      size_(size),
      device_(device),
      timeout_(timeout),
      description_(absl::StrCat("group '", name_, "' (", backend_, ", rank ", rank_, " of ",
                                size_, ")")) {}

absl::StatusOr<absl::Duration> ProcessGroup::ResolveTimeout(absl::Duration requested) const {
  if (requested < absl::ZeroDuration()) {
    return InvalidArgument(absl::StrCat("negative op timeout ", absl::FormatDuration(requested)),
                           "a positive timeout, or kUseGroupTimeout for the group's default");
  }
  return requested == kUseGroupTimeout ? timeout_ : requested;
}

absl::Status ProcessGroup::CheckTensor(const Tensor& t, absl::string_view what) const {
  if (!t.defined()) {
    return InvalidArgument(absl::StrCat(what, " is an undefined tensor"), "a defined tensor");
  }
  if (!t.is_contiguous()) {
    return InvalidArgument(absl::StrCat(what, " ", TensorString(t), " is not contiguous"),
                           "a contiguous tensor",
                           "call Contiguous() first and copy the result back if needed");
  }
  if (t.device() != device_) {
    return InvalidArgument(absl::StrCat(what, " lives on ", t.device().ToString()),
                           absl::StrCat("tensors on ", device_.ToString(), " for ", description_),
                           device_.is_cpu() ? "use a gloo group for CPU tensors"
                                            : "use a gloo group for CPU tensors, or move the "
                                              "tensor to this group's GPU");
  }
  return absl::OkStatus();
}

OpInfo ProcessGroup::Unissued(absl::string_view op, std::string detail) const {
  OpInfo info;
  info.group = description_;
  info.op = std::string(op);
  info.detail = std::move(detail);
  info.timeout = timeout_;
  info.global_ranks = global_ranks_;
  return info;
}

std::shared_ptr<Work> ProcessGroup::Issue(
    OpInfo info, NativeStream stream, std::vector<Traffic> traffic,
    const std::function<std::shared_ptr<Work>(const OpContext&)>& issue) {
  info.seq = (info.point_to_point ? next_p2p_seq_ : next_collective_seq_).fetch_add(1) + 1;
  if (!info.point_to_point && info.op == "all_reduce" &&
      CollectiveFaultFor(name_, info.seq) == CollectiveFault::Kind::kSkip) {
    // --debug_collective_fault: this rank never issues the op.
    return MakeCompletedWork(info, absl::OkStatus());
  }
  if (absl::Status h = health_->status(); !h.ok()) {
    return MakeCompletedWork(
        info, Annotate(h, absl::StrCat(info.Describe(), " not started because the group broke "
                                       "earlier")));
  }
  int64_t payload = 0;
  for (const Traffic& t : traffic) {
    stats_.Record(t.kind, t.payload_bytes, t.bus_bytes);
    payload += t.payload_bytes;
  }
  const int64_t issued_us = observer_ != nullptr ? WallMicros() : 0;
  info.flight = FlightRecorder::Global().Record(info, name_, rank_, size_, global_ranks_.get());
  OpContext ctx{std::move(info), stream};
  std::shared_ptr<Work> work = issue(ctx);
  if (observer_ != nullptr) work->Observe(observer_, payload, issued_us);
  return work;
}

#define WEFT_PG_CHECK(info, expr)                                        \
  do {                                                                   \
    absl::Status weft_pg_status_ = (expr);                               \
    if (!weft_pg_status_.ok()) {                                         \
      return MakeCompletedWork(                                          \
          info, Annotate(weft_pg_status_, (info).op + " on " + description_)); \
    }                                                                    \
  } while (0)

std::shared_ptr<Work> ProcessGroup::AllReduce(const Tensor& full,
                                              const AllReduceOptions& options) {
  // --debug_collective_fault=resize: one element fewer than the peers. (The
  // sequence number is the one Issue will take: ops come from one thread.)
  const bool resize =
      full.numel() > 1 &&
      CollectiveFaultFor(name_, next_collective_seq_.load() + 1) == CollectiveFault::Kind::kResize;
  const Tensor tensor = resize ? full.Flatten().Slice(0, 0, full.numel() - 1) : full;
  OpInfo info = Unissued("all_reduce", "");
  WEFT_PG_CHECK(info, CheckTensor(tensor, "tensor"));
  info.detail = absl::StrCat(ReduceOpName(options.op), ", ", TensorString(tensor), " = ",
                             Bytes(tensor), " B");
  info.fingerprint = absl::StrCat("all_reduce ", ReduceOpName(options.op), " ",
                                  DTypeName(tensor.dtype()), " n=", tensor.numel());
  WEFT_PG_CHECK(info, CheckReducible(tensor.dtype(), options.op));
  auto timeout = ResolveTimeout(options.timeout);
  WEFT_PG_CHECK(info, timeout.status());
  info.timeout = *timeout;
  const int64_t s = Bytes(tensor);
  return Issue(std::move(info), options.stream,
               {{OpKind::kAllReduce, s, BusBytes(OpKind::kAllReduce, s, size_)}},
               [&](const OpContext& ctx) { return DoAllReduce(ctx, tensor, options.op); });
}

std::shared_ptr<Work> ProcessGroup::ReduceScatter(const Tensor& input, const Tensor& output,
                                                  const ReduceScatterOptions& options) {
  OpInfo info = Unissued("reduce_scatter", "");
  WEFT_PG_CHECK(info, CheckTensor(input, "input"));
  WEFT_PG_CHECK(info, CheckTensor(output, "output"));
  info.detail = absl::StrCat(ReduceOpName(options.op), ", ", TensorString(input), " -> ",
                             TensorString(output), " = ", Bytes(input), " B");
  info.fingerprint = absl::StrCat("reduce_scatter ", ReduceOpName(options.op), " ",
                                  DTypeName(input.dtype()), " in=", input.numel(),
                                  " out=", output.numel());
  WEFT_PG_CHECK(info, SameDType(input, output, "reduce_scatter"));
  WEFT_PG_CHECK(info, CheckReducible(input.dtype(), options.op));
  if (input.numel() != size_ * output.numel()) {
    WEFT_PG_CHECK(info, InvalidArgument(
                            absl::StrCat("input has ", input.numel(), " elements and output ",
                                         output.numel()),
                            absl::StrCat("input.numel() == group size (", size_,
                                         ") x output.numel()"),
                            "pad the input to a multiple of the group size"));
  }
  auto timeout = ResolveTimeout(options.timeout);
  WEFT_PG_CHECK(info, timeout.status());
  info.timeout = *timeout;
  const int64_t s = Bytes(input);
  return Issue(std::move(info), options.stream,
               {{OpKind::kReduceScatter, s, BusBytes(OpKind::kReduceScatter, s, size_)}},
               [&](const OpContext& ctx) { return DoReduceScatter(ctx, input, output, options.op); });
}

std::shared_ptr<Work> ProcessGroup::AllGather(const Tensor& input, const Tensor& output,
                                              const AllGatherOptions& options) {
  OpInfo info = Unissued("all_gather", "");
  WEFT_PG_CHECK(info, CheckTensor(input, "input"));
  WEFT_PG_CHECK(info, CheckTensor(output, "output"));
  info.detail = absl::StrCat(TensorString(input), " -> ", TensorString(output), " = ",
                             Bytes(output), " B");
  info.fingerprint = absl::StrCat("all_gather ", DTypeName(input.dtype()), " in=",
                                  input.numel(), " out=", output.numel());
  WEFT_PG_CHECK(info, SameDType(input, output, "all_gather"));
  if (output.numel() != size_ * input.numel()) {
    WEFT_PG_CHECK(info, InvalidArgument(
                            absl::StrCat("input has ", input.numel(), " elements and output ",
                                         output.numel()),
                            absl::StrCat("output.numel() == group size (", size_,
                                         ") x input.numel()"),
                            "use the AllGather overload with a vector of outputs for uneven "
                            "parts"));
  }
  auto timeout = ResolveTimeout(options.timeout);
  WEFT_PG_CHECK(info, timeout.status());
  info.timeout = *timeout;
  const int64_t s = Bytes(output);
  return Issue(std::move(info), options.stream,
               {{OpKind::kAllGather, s, BusBytes(OpKind::kAllGather, s, size_, Bytes(input))}},
               [&](const OpContext& ctx) { return DoAllGather(ctx, input, output); });
}

std::shared_ptr<Work> ProcessGroup::AllGather(const Tensor& input,
                                              absl::Span<const Tensor> outputs,
                                              const AllGatherOptions& options) {
  OpInfo info = Unissued("all_gather", "");
  WEFT_PG_CHECK(info, CheckTensor(input, "input"));
  if (static_cast<int>(outputs.size()) != size_) {
    WEFT_PG_CHECK(info, InvalidArgument(absl::StrCat(outputs.size(), " output tensors"),
                                        absl::StrCat("one per rank (", size_, ")")));
  }
  int64_t total = 0;
  std::vector<std::string> parts;
  for (int r = 0; r < size_; ++r) {
    WEFT_PG_CHECK(info, CheckTensor(outputs[r], absl::StrCat("outputs[", r, "]")));
    WEFT_PG_CHECK(info, SameDType(input, outputs[r], "all_gather"));
    total += Bytes(outputs[r]);
    parts.push_back(absl::StrCat(outputs[r].numel()));
  }
  info.detail = absl::StrCat(TensorString(input), " -> ", DTypeName(input.dtype()), " parts [",
                             absl::StrJoin(parts, ", "), "] = ", total, " B");
  info.fingerprint = absl::StrCat("all_gather ", DTypeName(input.dtype()), " parts=[",
                                  absl::StrJoin(parts, ","), "]");
  if (outputs[rank_].numel() != input.numel()) {
    WEFT_PG_CHECK(info, InvalidArgument(
                            absl::StrCat("outputs[", rank_, "] has ", outputs[rank_].numel(),
                                         " elements but this rank's input has ", input.numel()),
                            "outputs[rank()].numel() == input.numel()"));
  }
  auto timeout = ResolveTimeout(options.timeout);
  WEFT_PG_CHECK(info, timeout.status());
  info.timeout = *timeout;
  return Issue(std::move(info), options.stream,
               {{OpKind::kAllGather, total,
                 BusBytes(OpKind::kAllGather, total, size_, Bytes(input))}},
               [&](const OpContext& ctx) {
                 return DoAllGatherV(ctx, input,
                                     std::vector<Tensor>(outputs.begin(), outputs.end()));
               });
}

std::shared_ptr<Work> ProcessGroup::Broadcast(const Tensor& tensor,
                                              const BroadcastOptions& options) {
  OpInfo info = Unissued("broadcast", "");
  WEFT_PG_CHECK(info, CheckTensor(tensor, "tensor"));
  info.detail = absl::StrCat("root ", options.root, ", ", TensorString(tensor), " = ",
                             Bytes(tensor), " B");
  info.fingerprint = absl::StrCat("broadcast root=", options.root, " ",
                                  DTypeName(tensor.dtype()), " n=", tensor.numel());
  if (options.root < 0 || options.root >= size_) {
    WEFT_PG_CHECK(info, InvalidArgument(absl::StrCat("broadcast root ", options.root),
                                        absl::StrCat("a group rank in [0, ", size_, ")")));
  }
  auto timeout = ResolveTimeout(options.timeout);
  WEFT_PG_CHECK(info, timeout.status());
  info.timeout = *timeout;
  info.peer = options.root == rank_ ? -1 : options.root;
  const int64_t s = Bytes(tensor);
  return Issue(std::move(info), options.stream,
               {{OpKind::kBroadcast, s, BusBytes(OpKind::kBroadcast, s, size_)}},
               [&](const OpContext& ctx) { return DoBroadcast(ctx, tensor, options.root); });
}

std::shared_ptr<Work> ProcessGroup::AllToAll(const Tensor& input, const Tensor& output,
                                             const AllToAllOptions& options) {
  OpInfo info = Unissued("all_to_all", "");
  WEFT_PG_CHECK(info, CheckTensor(input, "input"));
  WEFT_PG_CHECK(info, CheckTensor(output, "output"));
  info.detail = absl::StrCat(TensorString(input), " -> ", TensorString(output), " = ",
                             Bytes(input), " B");
  info.fingerprint = absl::StrCat("all_to_all ", DTypeName(input.dtype()), " n=", input.numel());
  WEFT_PG_CHECK(info, SameDType(input, output, "all_to_all"));
  if (input.numel() != output.numel() || input.numel() % size_ != 0) {
    WEFT_PG_CHECK(info, InvalidArgument(
                            absl::StrCat("input has ", input.numel(), " elements and output ",
                                         output.numel()),
                            absl::StrCat("equal element counts divisible by the group size (",
                                         size_, ")"),
                            "use AllToAllV for uneven blocks"));
  }
  auto timeout = ResolveTimeout(options.timeout);
  WEFT_PG_CHECK(info, timeout.status());
  info.timeout = *timeout;
  const int64_t s = Bytes(input);
  std::vector<int64_t> counts(size_, input.numel() / size_);
  return Issue(std::move(info), options.stream,
               {{OpKind::kAllToAll, s, BusBytes(OpKind::kAllToAll, s, size_)}},
               [&](const OpContext& ctx) { return DoAllToAllV(ctx, input, counts, output, counts); });
}

std::shared_ptr<Work> ProcessGroup::AllToAllV(const Tensor& input,
                                              absl::Span<const int64_t> input_splits,
                                              const Tensor& output,
                                              absl::Span<const int64_t> output_splits,
                                              const AllToAllOptions& options) {
  OpInfo info = Unissued("all_to_all_v", "");
  WEFT_PG_CHECK(info, CheckTensor(input, "input"));
  WEFT_PG_CHECK(info, CheckTensor(output, "output"));
  info.detail = absl::StrCat(TensorString(input), " splits [", absl::StrJoin(input_splits, ", "),
                             "] -> ", TensorString(output), " splits [",
                             absl::StrJoin(output_splits, ", "), "]");
  WEFT_PG_CHECK(info, SameDType(input, output, "all_to_all_v"));
  if (input.ndim() == 0 || output.ndim() == 0) {
    WEFT_PG_CHECK(info, InvalidArgument("a 0-d tensor", "tensors with a dim 0 to split"));
  }
  const int64_t in_row = NumElements(absl::MakeConstSpan(input.shape()).subspan(1));
  const int64_t out_row = NumElements(absl::MakeConstSpan(output.shape()).subspan(1));
  info.fingerprint = absl::StrCat("all_to_all_v ", DTypeName(input.dtype()), " row=", in_row);
  if (in_row != out_row) {
    WEFT_PG_CHECK(info, InvalidArgument(absl::StrCat("rows of ", in_row, " (input) and ",
                                                     out_row, " (output) elements"),
                                        "the same row size (product of dims 1..) in both"));
  }
  auto to_counts = [&](const Tensor& t, absl::Span<const int64_t> splits,
                       absl::string_view what) -> absl::StatusOr<std::vector<int64_t>> {
    std::vector<int64_t> counts;
    if (splits.empty()) {
      if (t.dim(0) % size_ != 0) {
        return InvalidArgument(absl::StrCat(what, " dim 0 is ", t.dim(0), " with no splits"),
                               absl::StrCat("a dim 0 divisible by the group size (", size_,
                                            ") or explicit splits"));
      }
      return std::vector<int64_t>(size_, t.dim(0) / size_ * in_row);
    }
    if (static_cast<int>(splits.size()) != size_) {
      return InvalidArgument(absl::StrCat(splits.size(), " ", what, " splits"),
                             absl::StrCat("one split per rank (", size_, ")"));
    }
    int64_t rows = 0;
    for (int64_t s : splits) {
      if (s < 0) {
        return InvalidArgument(absl::StrCat("negative ", what, " split ", s), "splits >= 0");
      }
      rows += s;
      counts.push_back(s * in_row);
    }
    if (rows != t.dim(0)) {
      return InvalidArgument(absl::StrCat(what, " splits sum to ", rows, " rows but ", what,
                                          " dim 0 is ", t.dim(0)),
                             "splits that sum to dim 0");
    }
    return counts;
  };
  auto in_counts = to_counts(input, input_splits, "input");
  WEFT_PG_CHECK(info, in_counts.status());
  auto out_counts = to_counts(output, output_splits, "output");
  WEFT_PG_CHECK(info, out_counts.status());
  auto timeout = ResolveTimeout(options.timeout);
  WEFT_PG_CHECK(info, timeout.status());
  info.timeout = *timeout;
  const int64_t s = Bytes(input);
  const int64_t self = (*in_counts)[rank_] * static_cast<int64_t>(DTypeSize(input.dtype()));
  return Issue(std::move(info), options.stream,
               {{OpKind::kAllToAllV, s, BusBytes(OpKind::kAllToAllV, s, size_, self)}},
               [&](const OpContext& ctx) {
                 return DoAllToAllV(ctx, input, *in_counts, output, *out_counts);
               });
}

std::shared_ptr<Work> ProcessGroup::Send(const Tensor& tensor, int dst,
                                         const P2POptions& options) {
  const P2POp op{P2POp::Type::kSend, tensor, dst, options.tag};
  return BatchSendRecv({&op, 1}, options);
}

std::shared_ptr<Work> ProcessGroup::Recv(const Tensor& tensor, int src,
                                         const P2POptions& options) {
  const P2POp op{P2POp::Type::kRecv, tensor, src, options.tag};
  return BatchSendRecv({&op, 1}, options);
}

std::shared_ptr<Work> ProcessGroup::BatchSendRecv(absl::Span<const P2POp> ops,
                                                  const P2POptions& options) {
  const bool single = ops.size() == 1;
  const char* op_name = !single                            ? "batch_send_recv"
                        : ops[0].type == P2POp::Type::kSend ? "send"
                                                            : "recv";
  OpInfo info = Unissued(op_name, "");
  info.point_to_point = true;
  std::vector<std::string> legs;
  std::vector<Traffic> traffic;
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2POp& op = ops[i];
    const bool is_send = op.type == P2POp::Type::kSend;
    WEFT_PG_CHECK(info, CheckTensor(op.tensor, absl::StrCat(is_send ? "send" : "recv",
                                                            " tensor #", i)));
    legs.push_back(absl::StrCat(is_send ? "send " : "recv ", TensorString(op.tensor),
                                is_send ? " to " : " from ", "rank ", op.peer, " tag ", op.tag));
    if (op.peer < 0 || op.peer >= size_ || op.peer == rank_) {
      WEFT_PG_CHECK(info, InvalidArgument(
                              absl::StrCat(legs.back(), " names peer rank ", op.peer),
                              absl::StrCat("another rank of the group, in [0, ", size_,
                                           ") and not this rank (", rank_, ")")));
    }
    if (op.tag < 0) {
      WEFT_PG_CHECK(info, InvalidArgument(absl::StrCat("tag ", op.tag), "a tag >= 0"));
    }
    const OpKind kind = is_send ? OpKind::kSend : OpKind::kRecv;
    const int64_t s = Bytes(op.tensor);
    traffic.push_back({kind, s, BusBytes(kind, s, size_)});
  }
  if (ops.empty()) {
    WEFT_PG_CHECK(info, InvalidArgument("an empty batch", "at least one send or recv"));
  }
  info.detail = absl::StrJoin(legs, "; ");
  if (single) info.peer = ops[0].peer;
  auto timeout = ResolveTimeout(options.timeout);
  WEFT_PG_CHECK(info, timeout.status());
  info.timeout = *timeout;
  return Issue(std::move(info), options.stream, std::move(traffic), [&](const OpContext& ctx) {
    return DoBatchSendRecv(ctx, std::vector<P2POp>(ops.begin(), ops.end()));
  });
}

std::shared_ptr<Work> ProcessGroup::Barrier(const BarrierOptions& options) {
  OpInfo info = Unissued("barrier", "no data");
  info.fingerprint = "barrier";
  auto timeout = ResolveTimeout(options.timeout);
  WEFT_PG_CHECK(info, timeout.status());
  info.timeout = *timeout;
  return Issue(std::move(info), options.stream, {{OpKind::kBarrier, 0, 0.0}},
               [&](const OpContext& ctx) { return DoBarrier(ctx); });
}

#undef WEFT_PG_CHECK

}  // namespace weft::comm
