// One ring of an iouscope-load run as the main thread and its worker share it, the --file that
// rings with op=read read from, and the user_data that tells a ring's own SQEs apart.
#pragma once

#include <liburing.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "config.hpp"

namespace iouscope::load {

inline constexpr std::size_t kBlockSize = 4096;

// user_data of the SQEs that are not the ring's normal ones, whose user_data is 0 (NOP) or a
// buffer slot below depth (read): the stuck= reads and the overflow= NOPs, each numbered in the
// low bits.
inline constexpr std::uint64_t kStuckUserData = std::uint64_t{1} << 63;
inline constexpr std::uint64_t kOverflowUserData = std::uint64_t{1} << 62;
inline constexpr std::uint64_t kFanoutUserData = std::uint64_t{1} << 61;
// The provided-buffer group of a ring with bufs=.
inline constexpr std::uint16_t kBufGroup = 0;

// The --file of the rings whose op is read; fd -1 when no ring reads. The scratch file of the
// rings whose op is write: unlinked at once, so it goes with the process; -1 when no ring writes.
// The O_DIRECT scratch file of the rings with op=write,direct, likewise.
struct Workload {
    int fd = -1;
    std::uint64_t blocks = 0;  // number of 4 KiB blocks in the file
    int scratch_fd = -1;
    int direct_fd = -1;
};

struct RingState {
    std::size_t index = 0;
    RingSpec spec;
    io_uring ring{};
    bool open = false;
    int sq_thread = -1;

    // Read by the main thread for progress while the worker runs.
    std::atomic<std::uint64_t> progress{0};

    // Written by the worker, read by the main thread only after join().
    std::uint64_t sqes = 0;
    std::uint64_t cqes = 0;
    std::uint64_t cqe_errors = 0;
    int first_cqe_error = 0;
    unsigned overflowed = 0;       // overflow=K once the kernel was seen to overflow K CQEs
    std::uint64_t enobufs = 0;     // bufs=: reads that found no provided buffer (-ENOBUFS)
    std::uint64_t stuck_cqes = 0;  // stuck= reads that completed during the run (none should)
    int first_stuck_res = 0;
    std::string failure_call;  // non-empty after a fatal io_uring error
    int failure_errno = 0;
    std::string failure_detail;
};

}  // namespace iouscope::load
