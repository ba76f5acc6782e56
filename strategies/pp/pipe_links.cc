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
  if (!t.device().is_cpu()) {  // groups take tensors of their device (cuda, meta)
    WEFT_ASSIGN_OR_RETURN(header, header.To(t.device(), stream));
  }
  WEFT_ASSIGN_OR_RETURN(Tensor body, t.Contiguous(stream));
  sends_.push_back({g.Send(header, peer, {.tag = 2 * tag, .stream = stream}), header});
  sends_.push_back({g.Send(body, peer, {.tag = 2 * tag + 1, .stream = stream}), body});
  return absl::OkStatus();
}

absl::StatusOr<Tensor> PipeLinks::Recv(comm::ProcessGroup& g, int peer, int tag,
                                       const RunContext& ctx,
                                       const absl::StatusOr<StageTensor>& expected,
                                       const char* what) {
  WEFT_ASSIGN_OR_RETURN(Tensor header, ctx.Zeros({kHeaderSize}, DType::kI64));
  WEFT_RETURN_IF_ERROR(g.Recv(header, peer, {.tag = 2 * tag, .stream = ctx.stream})->Wait());
  StageTensor spec;
  if (ctx.device.is_meta()) {
    // A dry run: the header holds nothing, so allocate what is expected.
    if (!expected.ok()) {
      return FailedPrecondition(
          absl::StrCat("a dry run of pipeline rank ", rank_, " receiving ", what,
                       " from rank ", peer, ", whose shape it cannot know: ",
                       expected.status().message()),
          "a model that states its stage inputs (Model::StageInput)",
          "estimate a layout without --pp, or implement StageInput for this model");
    }
    spec = *expected;
  } else {
    WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> h, header.ToVector<int64_t>());
    if (h[0] < 0 || h[0] > kHeaderSize - 2) {
      return Internal(absl::StrCat("pipeline message header with ", h[0], " dimensions"));
    }
    spec.shape = Shape(h.begin() + 1, h.begin() + 1 + h[0]);
    spec.dtype = static_cast<DType>(h[kHeaderSize - 1]);
    if (expected.ok() && !(spec == *expected)) {
      return Internal(absl::StrCat("pipeline rank ", rank_, " received ", what, " ",
                                   spec.ToString(), " from rank ", peer),
                      absl::StrCat(expected->ToString(), ", as stated before it arrived"),
                      "Model::StageInput (or a strategy's ParallelState::stage_boundary) "
                      "misstates the stage boundary, which memory estimates rely on");
    }
  }
  WEFT_ASSIGN_OR_RETURN(Tensor body, ctx.Empty(spec.shape, spec.dtype));
  WEFT_RETURN_IF_ERROR(g.Recv(body, peer, {.tag = 2 * tag + 1, .stream = ctx.stream})->Wait());
  return body;
}

absl::Status PipeLinks::SendForward(const Tensor& t, int tag, NativeStream stream) {
  const int link = rank_;  // rank -> rank + 1
  sent_forward_[tag] = StageTensor::Of(t);
  return Send(*links_[0][link % 2], t, (rank_ + 1) % size_, tag, stream);
}

absl::StatusOr<Tensor> PipeLinks::RecvForward(int tag, const RunContext& ctx,
                                              const absl::StatusOr<StageTensor>& expected) {
  const int link = (rank_ - 1 + size_) % size_;
  return Recv(*links_[0][link % 2], link, tag, ctx, expected, "an activation");
}

absl::Status PipeLinks::SendBackward(const Tensor& t, int tag, NativeStream stream) {
  const int link = (rank_ - 1 + size_) % size_;  // link (rank - 1, rank), against the flow
  return Send(*links_[1][link % 2], t, link, tag, stream);
}

absl::StatusOr<Tensor> PipeLinks::RecvBackward(int tag, const RunContext& ctx) {
  const int link = rank_;
  // The gradient of what went forward with this tag, of its shape and dtype.
  absl::StatusOr<StageTensor> expected =
      absl::NotFoundError(absl::StrCat("no activation was sent with tag ", tag));
  if (auto it = sent_forward_.find(tag); it != sent_forward_.end()) {
    expected = it->second;
    sent_forward_.erase(it);
  }
  return Recv(*links_[1][link % 2], (rank_ + 1) % size_, tag, ctx, expected, "a gradient");
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
