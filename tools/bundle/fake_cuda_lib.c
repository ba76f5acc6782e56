// A stand-in for one CUDA library in run_test. Its BUILD target
// names the one function it exports (FAKE_SYMBOL) and its soname.
int FAKE_SYMBOL(void) { return 0; }
