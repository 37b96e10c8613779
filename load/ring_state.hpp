// One ring of an iouscope-load run as the main thread and its worker share it, and the workload
// every worker submits (NOPs, or 4 KiB reads of the --file).
#pragma once

#include <liburing.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "config.hpp"

namespace iouscope::load {

inline constexpr std::size_t kBlockSize = 4096;

struct Workload {
    Op op = Op::Nop;
    int fd = -1;
    std::uint64_t blocks = 0;  // number of 4 KiB blocks in the file
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
    std::string failure_call;  // non-empty after a fatal io_uring error
    int failure_errno = 0;
    std::string failure_detail;
};

}  // namespace iouscope::load
