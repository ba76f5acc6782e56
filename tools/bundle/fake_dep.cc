// A shared library the run-script test's binary needs; it stands in for
// libnccl/libcudart, which a bundle leaves to the target machine.
extern "C" int weft_fake_dep_answer() { return 42; }
