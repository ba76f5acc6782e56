// The "meta" process-group backend: groups of any size whose collectives
// complete at once and move nothing. Tensors live on the meta device
// (core/tensor/meta_backend.cc), so there is nothing to move; what matters
// to a dry run is that strategies build exactly the buffers they build in
// a real job, sized by the group's size and this rank's place in it.
//
// Each process simulates one rank; the group never talks to its peers or
// to the store, so one process can stand in for rank r of an N-rank job.
#include <memory>

#include "comm/process_group/process_group.h"
#include "comm/process_group/registry.h"

namespace weft::comm {
namespace {

class MetaProcessGroup : public ProcessGroup {
 public:
  MetaProcessGroup(const ProcessGroupOptions& options, int rank, int size)
      : ProcessGroup("meta", options.name, rank, size, Device::Meta(), options.timeout) {}

 protected:
  std::shared_ptr<Work> DoAllReduce(const OpContext& ctx, const Tensor&, ReduceOp) override {
    return Done(ctx);
  }
  std::shared_ptr<Work> DoReduceScatter(const OpContext& ctx, const Tensor&, const Tensor&,
                                        ReduceOp) override {
    return Done(ctx);
  }
  std::shared_ptr<Work> DoAllGather(const OpContext& ctx, const Tensor&, const Tensor&) override {
    return Done(ctx);
  }
  std::shared_ptr<Work> DoAllGatherV(const OpContext& ctx, const Tensor&,
                                     std::vector<Tensor>) override {
    return Done(ctx);
  }
  std::shared_ptr<Work> DoBroadcast(const OpContext& ctx, const Tensor&, int) override {
    return Done(ctx);
  }
  std::shared_ptr<Work> DoAllToAllV(const OpContext& ctx, const Tensor&, std::vector<int64_t>,
                                    const Tensor&, std::vector<int64_t>) override {
    return Done(ctx);
  }
  std::shared_ptr<Work> DoBatchSendRecv(const OpContext& ctx, std::vector<P2POp>) override {
    return Done(ctx);
  }
  std::shared_ptr<Work> DoBarrier(const OpContext& ctx) override { return Done(ctx); }

 private:
  static std::shared_ptr<Work> Done(const OpContext& ctx) {
    return MakeCompletedWork(ctx.info, absl::OkStatus());
  }
};

absl::StatusOr<std::shared_ptr<ProcessGroup>> CreateMeta(std::shared_ptr<Store>, int rank,
                                                         int size,
                                                         const ProcessGroupOptions& options) {
  return std::shared_ptr<ProcessGroup>(std::make_shared<MetaProcessGroup>(options, rank, size));
}

const bool kRegistered = RegisterProcessGroupBackendAtStartup("meta", &CreateMeta);

}  // namespace
}  // namespace weft::comm
