#include "core/runtime/nvtx_ranges.h"

#if defined(WEFT_HAVE_NVTX)
#include <nvtx3/nvToolsExt.h>
#endif

namespace weft {

#if defined(WEFT_HAVE_NVTX)
void NvtxPush(const char* name) { nvtxRangePushA(name); }
void NvtxPop() { nvtxRangePop(); }
#else
void NvtxPush(const char*) {}
void NvtxPop() {}
#endif

}  // namespace weft
