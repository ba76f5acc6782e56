// Registers the "nccl" process-group backend when //comm/nccl is linked.
#include "comm/nccl/nccl_process_group.h"
#include "comm/process_group/registry.h"

namespace weft::comm {
namespace {

const bool kRegistered =
    RegisterProcessGroupBackendAtStartup("nccl", &NcclProcessGroup::Create);

}  // namespace
}  // namespace weft::comm
