// pipes=N of an iouscope-load ring: completions that come by task work, from another thread.
#pragma once

#include <cstdint>

#include "ring_state.hpp"
#include "run_control.hpp"

namespace iouscope::load {

// What a pipes= ring submitted and reaped, both counted once the kernel has them.
struct PipeCounts {
    std::uint64_t sqes = 0;
    std::uint64_t cqes = 0;
};

// Keeps one 1-byte read in flight on each of the ring's N pipes, which a writer thread of the
// ring feeds a byte at a time, in turn, at rate= bytes a second. The ring's thread submits and
// waits for batch= completions per io_uring_submit_and_wait, and reads each pipe again as its
// read completes. A read of an empty pipe is armed for poll, and the write that fills it
// completes it by task work: without IORING_SETUP_DEFER_TASKRUN the waiter is woken for each
// write that finds none pending, with it once per batch= completions. At the end the writer
// writes a byte to every pipe, so every read completes. A failure is left in `st`.
PipeCounts run_pipe_ring(RingState& st, RunControl& ctl);

}  // namespace iouscope::load
