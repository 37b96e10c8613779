// The thread that drives one ring of an iouscope-load run: submit, reap, drain, and the check
// of its counts against the kernel's SQ head.
#pragma once

#include "ring_state.hpp"
#include "run_control.hpp"

namespace iouscope::load {

// Waits for the start, submits until the ring's count, the deadline or a stop, collects every
// completion, then leaves the counts (or the failure) in `st` and marks the ring done in `ctl`.
void run_ring_worker(RingState& st, RunControl& ctl, const Workload& wl);

}  // namespace iouscope::load
