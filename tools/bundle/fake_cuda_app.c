// A binary that loads the fake CUDA libraries (run_test): it prints
// its arguments and exits with 3, so the test sees that run started it and
// passed both through.
#include <stdio.h>

int fake_nccl(void);
int fake_cudart(void);
#ifndef FAKE_MISSING_ONLY
int fake_cublaslt(void);
#endif

int main(int argc, char** argv) {
  int sum = fake_nccl() + fake_cudart();
#ifndef FAKE_MISSING_ONLY
  sum += fake_cublaslt();
#endif
  printf("fake_cuda_app ran:");
  for (int i = 1; i < argc; ++i) printf(" %s", argv[i]);
  printf("\n");
  return 3 + sum;
}
