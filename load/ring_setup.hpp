// What an iouscope-load run sets up before its first SQE: the --file of a read workload, the
// file descriptor limit, and the rings themselves with the flags their specs ask for. Every
// failure here ends the process with the usage or system error that names its cause.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "config.hpp"
#include "ring_state.hpp"

namespace iouscope::load {

using Rings = std::vector<std::unique_ptr<RingState>>;

// The spec as messages name a ring: "mode=sqpoll depth=64 idle=10 share=0".
std::string describe(const RingSpec& spec);

// Raises RLIMIT_NOFILE to hold `rings` rings, or dies saying how to.
void ensure_fd_limit(std::size_t rings);

// Opens and sizes the --file of --op read (a usage error if it cannot serve O_DIRECT reads); a
// NOP workload has no file.
Workload open_workload(const LoadConfig& cfg);

// Creates every ring of `cfg` in order (share= attaches to an earlier one's SQ thread) and
// submits its stuck= reads, or dies naming the ring, the error and the likely cause. Dies too if
// a ring with overflow= lacks IORING_FEAT_NODROP.
Rings create_rings(const LoadConfig& cfg);

// Submits every SQE queued in the ring's SQ and returns once the kernel has consumed them all
// (for SQPOLL: once the SQ thread has moved the SQ head past them): 0, or -errno, -ETIMEDOUT
// after 10 s. Used for the SQEs the load sends besides its normal ones (stuck=, overflow=).
int submit_all(io_uring& ring);

}  // namespace iouscope::load
