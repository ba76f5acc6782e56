#include "comm/process_group/registry.h"

#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/store/prefix_store.h"
#include "core/base/check.h"
#include "core/base/errors.h"

namespace weft::comm {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, ProcessGroupFactory, std::less<>> factories;
};

Registry& GetRegistry() {
  static auto* registry = new Registry;
  return *registry;
}

// Backends weft knows about, with the target that provides each.
absl::string_view KnownBackendTarget(absl::string_view name) {
  if (name == "gloo") return "//comm/gloo";
  if (name == "nccl") return "//comm/nccl (needs the CUDA toolkit at build time)";
  return "";
}

}  // namespace

void RegisterProcessGroupBackend(absl::string_view name, ProcessGroupFactory factory) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  WEFT_CHECK(r.factories.find(name) == r.factories.end())
      << "process group backend '" << name << "' registered twice";
  r.factories.emplace(std::string(name), std::move(factory));
}

bool RegisterProcessGroupBackendAtStartup(absl::string_view name, ProcessGroupFactory factory) {
  RegisterProcessGroupBackend(name, std::move(factory));
  return true;
}

std::vector<std::string> RegisteredProcessGroupBackends() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, factory] : r.factories) names.push_back(name);
  return names;
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> CreateProcessGroup(
    absl::string_view backend, std::shared_ptr<Store> store, int rank, int size,
    const ProcessGroupOptions& options) {
  ProcessGroupFactory factory;
  {
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.factories.find(backend);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    std::vector<std::string> linked = RegisteredProcessGroupBackends();
    const std::string linked_list = linked.empty() ? "none" : absl::StrJoin(linked, ", ");
    const absl::string_view target = KnownBackendTarget(backend);
    if (!target.empty()) {
      return FailedPrecondition(
          absl::StrCat("process group backend '", backend,
                       "' is not linked into this binary (linked: ", linked_list, ")"),
          absl::StrCat("a binary that depends on ", target),
          backend == "nccl" ? "build on a machine with CUDA and add //comm/nccl to the "
                              "binary's deps, or use --backend=gloo for CPU tensors"
                            : "add the backend target to the binary's deps");
    }
    return NotFound(absl::StrCat("unknown process group backend '", backend, "'"),
                    absl::StrCat("one of the linked backends: ", linked_list));
  }
  if (store == nullptr) {
    return InvalidArgument("CreateProcessGroup got a null store", "a Store shared by the ranks");
  }
  if (size < 1 || rank < 0 || rank >= size) {
    return InvalidArgument(absl::StrCat("rank ", rank, " of a group of size ", size),
                           "size >= 1 and 0 <= rank < size");
  }
  if (options.name.empty()) {
    return InvalidArgument("an empty group name", "a name unique among groups on this store");
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return InvalidArgument(
        absl::StrCat("group timeout ", absl::FormatDuration(options.timeout)),
        "a positive timeout", "no op may wait forever; pick a generous bound instead");
  }
  auto scoped = std::make_shared<PrefixStore>(absl::StrCat("pg/", options.name), std::move(store));
  auto group = factory(std::move(scoped), rank, size, options);
  if (!group.ok()) {
    return Annotate(group.status(), absl::StrCat("creating ", backend, " group '", options.name,
                                                 "' (rank ", rank, " of ", size, ")"));
  }
  (*group)->SetObserver(options.observer);
  return group;
}

}  // namespace weft::comm
