// A stand-in for libnvidia-ml.so.1 with the functions GpuSampler uses and
// fixed readings, so the sampler's dlopen path is tested without a GPU.
#include <cstring>

extern "C" {

int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index > 0) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = reinterpret_cast<void*>(0x1);
  return 0;
}
int nvmlDeviceGetUtilizationRates(void*, unsigned int* util) {
  util[0] = 87;  // gpu
  util[1] = 40;  // memory
  return 0;
}
int nvmlDeviceGetMemoryInfo(void*, unsigned long long* mem) {
  mem[0] = 80ull << 30;  // total
  mem[2] = 12ull << 30;  // used
  mem[1] = mem[0] - mem[2];
  return 0;
}
int nvmlDeviceGetPowerUsage(void*, unsigned int* milliwatts) {
  *milliwatts = 412500;
  return 0;
}
int nvmlDeviceGetTemperature(void*, unsigned int, unsigned int* celsius) {
  *celsius = 61;
  return 0;
}

}  // extern "C"
