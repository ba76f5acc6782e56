#include "strategies/dp/dp.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/moe.h"
#include "core/tensor/device_backend.h"
#include "strategies/dp/data_parallel_model.h"

namespace weft {

OptionSchema DpStrategy::Options() const {
  OptionSchema s;
  s.Int("dp_devices", 2, "replicas (devices) inside the one process");
  return s;
}

absl::Status DpStrategy::Validate(const StrategyOptionSet& options,
                                  const comm::MeshLayout* mesh) const {
  if (mesh != nullptr && mesh->world_size() > 1) {
    return FailedPrecondition(
        absl::StrCat("dp in a job of ", mesh->world_size(), " processes"),
        "a single process: dp replicates over devices inside one process",
        "use --strategy=ddp for one process per device");
  }
  if (options.GetInt("dp_devices") < 1) {
    return InvalidArgument(absl::StrCat("dp_devices=", options.GetInt("dp_devices")),
                           "dp_devices >= 1");
  }
  return absl::OkStatus();
}

absl::StatusOr<StrategyResult> DpStrategy::Apply(StrategyContext& ctx) {
  StrategyResult result;
  const Device master = ctx.run->device;
  const int n = static_cast<int>(ctx.options->GetInt("dp_devices"));
  std::vector<Device> devices;
  if (master.is_cuda()) {
    WEFT_ASSIGN_OR_RETURN(DeviceBackend * backend, GetDeviceBackend(DeviceType::kCUDA));
    WEFT_ASSIGN_OR_RETURN(int count, backend->DeviceCount());
    if (master.index + n > count) {
      return FailedPrecondition(
          absl::StrCat("dp_devices=", n, " from ", master.ToString(), " with ", count,
                       " visible GPU(s)"),
          absl::StrCat("at most ", count - master.index, " devices"),
          "lower --dp_devices or check CUDA_VISIBLE_DEVICES");
    }
    for (int i = 0; i < n; ++i) devices.push_back(Device::Cuda(master.index + i));
  } else {
    // CPU "devices": one thread each, every replica in host memory. A dry
    // run (meta: memory estimates) keeps them all on meta, the master's
    // device, so its one allocator counts every replica, as a CPU job's
    // host memory holds them (a CUDA job's replicas 1.. live on their own
    // GPUs: for its device 0 the figure is then an upper bound).
    devices.assign(n, master.is_meta() ? master : Device::Cpu());
  }
  // Routing is per batch of rows: each replica routes its contiguous share
  // of a micro-batch alone, as one process would at micro_batch / n (not
  // as --moe_routing_groups=n, whose groups are strided).
  const std::vector<Module*> modules = ctx.model().Modules();
  if (n > 1 && std::any_of(modules.begin(), modules.end(),
                           [](Module* m) { return dynamic_cast<MoeLayer*>(m) != nullptr; })) {
    result.notes.push_back(absl::StrCat(
        "dp with MoE layers: each of the ", n,
        " replicas routes its contiguous share of a micro-batch as its own group (capacity and "
        "balance losses per share), which trains as one process at micro_batch / ", n,
        "; ddp over ranks routes like --moe_routing_groups"));
  }
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<DataParallelModel> wrapped,
                        DataParallelModel::Create(std::move(*ctx.model_slot), devices, *ctx.run,
                                                  ctx.grad_dtype));
  *ctx.model_slot = std::move(wrapped);
  return result;
}

}  // namespace weft
