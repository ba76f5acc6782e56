// When this process's flight recorder (comm/process_group/flight_recorder.h)
// is written out: on a failed run (the trainer calls DumpFlightRecorder), on
// SIGUSR2 (the run goes on), and, in a job of several ranks, on SIGTERM
// unless the stop signals own it (the launcher's SIGTERM to the ranks that
// did not fail: the ranks a hang report needs) and on SIGABRT, SIGSEGV and
// SIGBUS (gloo aborts a rank whose sizes do not match). After a signal's
// dump the process still dies of it, as it would have.
#ifndef WEFT_CORE_RUNTIME_FLIGHT_DUMP_H_
#define WEFT_CORE_RUNTIME_FLIGHT_DUMP_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/runtime/train_config.pb.h"

namespace weft {

// Sizes the recorder, names this rank in dumps, arms the debug fault when it
// names this rank, and installs the signal dumps (SIGTERM and the fatal
// signals only when `own_signals`). Errors: a bad --flight_recorder or
// --debug_collective_fault.
absl::Status StartFlightRecorder(const ParallelConfig& config, int rank, int world_size,
                                 bool own_signals);

// Writes this rank's dump with `reason` and says where on stderr; nothing
// when the recorder is off or was never started.
// With `unless_failed`, nothing when a failure's dump was written already.
void DumpFlightRecorder(absl::string_view reason, bool unless_failed = false);

// --flight_dir, or $TMPDIR/weft_flight, or /tmp/weft_flight.
std::string FlightDir(const ParallelConfig& config);

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_FLIGHT_DUMP_H_
