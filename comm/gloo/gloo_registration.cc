// Registers the "gloo" process-group backend when //comm/gloo is linked.
#include "comm/gloo/gloo_process_group.h"
#include "comm/process_group/registry.h"

namespace weft::comm {
namespace {

const bool kRegistered =
    RegisterProcessGroupBackendAtStartup("gloo", &GlooProcessGroup::Create);

}  // namespace
}  // namespace weft::comm
