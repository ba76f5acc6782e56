// Suppressions for --config=tsan (.bazelrc), compiled in rather than read
// from a file because a test's sandbox has no fixed path to the source tree.
// ThreadSanitizer calls this hook at start-up; without TSan nothing calls it.
//
// Only races whose both sides are in libraries Debian ships uninstrumented
// (gloo, protobuf, abseil) belong here. Each entry says which report it
// silences and why the race is not weft's to fix.

extern "C" const char* __tsan_default_suppressions() {
  return
      // gloo (libgloo.so.0): when a peer dies, gloo's collective throws and
      // unwinds, destroying its UnboundBuffers (~UnboundBuffer:
      // pthread_cond_destroy) while gloo's device thread may still signal
      // their condition variables (handleRecvCompletion for a receive that
      // just landed, signalException for the dead pair) under the buffer's
      // mutex; TSan sees nothing in gloo order the two. Both sides are gloo's;
      // weft only lets gloo's options object go out of scope. Failure path
      // only; seen in //comm/gloo:gloo_failure_test
      // (KilledRankFailsEveryOtherRankWithinTheTimeout).
      "race:gloo::transport::tcp::UnboundBuffer::~UnboundBuffer\n";
}
