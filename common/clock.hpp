#pragma once
// CLOCK_MONOTONIC in nanoseconds: the clock of bpf_ktime_get_ns(), so the daemon's instants and
// the BPF programs' timestamps compare directly.
#include <time.h>

#include <cstdint>

namespace iouscope {

inline std::uint64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + ts.tv_nsec;
}

}  // namespace iouscope
