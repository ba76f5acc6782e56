#include "strategies/pp/pipe_links.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft::pp {
namespace {

constexpr int kHeaderSize = 8;  // ndim, dims[6], dtype

}  // namespace

absl::StatusOr<std::unique_ptr<PipeLinks>> PipeLinks::Create(comm::DeviceMesh& mesh) {
  std::unique_ptr<PipeLinks> l(new PipeLinks());
  WEFT_ASSIGN_OR_RETURN(l->rank_, mesh.Coordinate("pp"));
  WEFT_ASSIGN_OR_RETURN(l->size_, mesh.AxisSize("pp"));
  WEFT_ASSIGN_OR_RETURN(l->pp_group_, mesh.Group("pp"));
  WEFT_ASSIGN_OR_RETURN(std::vector<int> ranks, mesh.GroupRanks("pp"));
  const char* names[2][2] = {{"pp_act_even", "pp_act_odd"}, {"pp_grad_even", "pp_grad_odd"}};
  for (int dir = 0; dir < 2; ++dir) {
    for (int parity = 0; parity < 2; ++parity) {
      WEFT_ASSIGN_OR_RETURN(l->links_[dir][parity], mesh.NewGroup(ranks, names[dir][parity]));
    }
  }
  return l;
}

absl::Status PipeLinks::Send(comm::ProcessGroup& g, const Tensor& t, int peer, int tag,
                             NativeStream stream) {
  if (t.ndim() > kHeaderSize - 2) {
    return InvalidArgument(absl::StrCat("a pipeline activation of ", t.ndim(), " dimensions"),
                           absl::StrCat("at most ", kHeaderSize - 2));
  }
  std::vector<int64_t> h(kHeaderSize, 0);
  h[0] = t.ndim();
  for (int d = 0; d < t.ndim(); ++d) h[1 + d] = t.dim(d);
  h[kHeaderSize - 1] = static_cast<int64_t>(t.dtype());
  WEFT_ASSIGN_OR_RETURN(Tensor header, Tensor::FromVector<int64_t>(h, {kHeaderSize}));
  if (t.device().is_cuda()) {
    WEFT_ASSIGN_OR_RETURN(header, header.To(t.device(), stream));
  }
  WEFT_ASSIGN_OR_RETURN(Tensor body, t.Contiguous(stream));
  sends_.push_back({g.Send(header, peer, {.tag = 2 * tag, .stream = stream}), header});
  sends_.push_back({g.Send(body, peer, {.tag = 2 * tag + 1, .stream = stream}), body});
  return absl::OkStatus();
}

absl::StatusOr<Tensor> PipeLinks::Recv(comm::ProcessGroup& g, int peer, int tag,
                                       const RunContext& ctx) {
  WEFT_ASSIGN_OR_RETURN(Tensor header, ctx.Zeros({kHeaderSize}, DType::kI64));
  WEFT_RETURN_IF_ERROR(g.Recv(header, peer, {.tag = 2 * tag, .stream = ctx.stream})->Wait());
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> h, header.ToVector<int64_t>());
  if (h[0] < 0 || h[0] > kHeaderSize - 2) {
    return Internal(absl::StrCat("pipeline message header with ", h[0], " dimensions"));
  }
  Shape shape(h.begin() + 1, h.begin() + 1 + h[0]);
  WEFT_ASSIGN_OR_RETURN(Tensor body,
                        ctx.Empty(shape, static_cast<DType>(h[kHeaderSize - 1])));
  WEFT_RETURN_IF_ERROR(g.Recv(body, peer, {.tag = 2 * tag + 1, .stream = ctx.stream})->Wait());
  return body;
}

absl::Status PipeLinks::SendForward(const Tensor& t, int tag, NativeStream stream) {
  const int link = rank_;  // rank -> rank + 1
  return Send(*links_[0][link % 2], t, (rank_ + 1) % size_, tag, stream);
}

absl::StatusOr<Tensor> PipeLinks::RecvForward(int tag, const RunContext& ctx) {
  const int link = (rank_ - 1 + size_) % size_;
  return Recv(*links_[0][link % 2], link, tag, ctx);
}

absl::Status PipeLinks::SendBackward(const Tensor& t, int tag, NativeStream stream) {
  const int link = (rank_ - 1 + size_) % size_;  // link (rank - 1, rank), against the flow
  return Send(*links_[1][link % 2], t, link, tag, stream);
}

absl::StatusOr<Tensor> PipeLinks::RecvBackward(int tag, const RunContext& ctx) {
  const int link = rank_;
  return Recv(*links_[1][link % 2], (rank_ + 1) % size_, tag, ctx);
}

absl::Status PipeLinks::WaitSends() {
  absl::Status first;
  for (InFlight& s : sends_) {
    absl::Status st = s.work->Wait();
    if (first.ok() && !st.ok()) first = Annotate(st, "pipeline send");
  }
  sends_.clear();
  return first;
}

}  // namespace weft::pp
