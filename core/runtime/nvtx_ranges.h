// NVTX ranges for Nsight Systems: the step's parts appear on the training
// thread's timeline above the kernels they launched. In CUDA builds this
// uses the toolkit's header-only NVTX 3 (which finds a profiler at run time
// and costs a branch without one); elsewhere both calls do nothing.
#ifndef WEFT_CORE_RUNTIME_NVTX_RANGES_H_
#define WEFT_CORE_RUNTIME_NVTX_RANGES_H_

namespace weft {

void NvtxPush(const char* name);
void NvtxPop();

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_NVTX_RANGES_H_
