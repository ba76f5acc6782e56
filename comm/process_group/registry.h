// The process-group backend registry and CreateProcessGroup.
//
// Backends register a factory by name from a tiny *_registration.cc in an
// alwayslink target: //comm/gloo registers "gloo", //comm/nccl registers
// "nccl" (CUDA builds only). A binary gets exactly the backends it links, so
// CPU-only binaries never link CUDA. A duplicate name aborts at startup.
//
//   auto world = CreateProcessGroup("gloo", store, rank, size, {.name = "world"});
//
// CreateProcessGroup blocks until every rank of the group has joined or
// options.timeout expires; all ranks must call it with the same backend,
// size and name. It namespaces the store under "pg/<name>", so groups on one
// store only need distinct names.
#ifndef WEFT_COMM_PROCESS_GROUP_REGISTRY_H_
#define WEFT_COMM_PROCESS_GROUP_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "comm/process_group/options.h"
#include "comm/process_group/process_group.h"
#include "comm/store/store.h"

namespace weft::comm {

// Called with a store already scoped to the group, and checked arguments.
using ProcessGroupFactory = std::function<absl::StatusOr<std::shared_ptr<ProcessGroup>>(
    std::shared_ptr<Store> store, int rank, int size, const ProcessGroupOptions& options)>;

void RegisterProcessGroupBackend(absl::string_view name, ProcessGroupFactory factory);
// For `static const bool kRegistered = ...` in registration files.
bool RegisterProcessGroupBackendAtStartup(absl::string_view name, ProcessGroupFactory factory);

// Sorted names of the linked backends.
std::vector<std::string> RegisteredProcessGroupBackends();

absl::StatusOr<std::shared_ptr<ProcessGroup>> CreateProcessGroup(
    absl::string_view backend, std::shared_ptr<Store> store, int rank, int size,
    const ProcessGroupOptions& options = {});

}  // namespace weft::comm

#endif  // WEFT_COMM_PROCESS_GROUP_REGISTRY_H_
