// Command-line model of iouscope-load, the whole run: operation, durations, pauses, hold and
// cycles, and the validated configuration built from the options as given. Pure like
// ring_spec.hpp: the system (the --file, the CPUs) is consulted by the caller, not here.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ring_spec.hpp"

namespace iouscope::load {

// "<number>[.<fraction>]<unit>" with unit ns, us, ms, s, m or h, e.g. "10s", "500ms", "1.5m".
// A unit is mandatory so that "10" cannot be misread as milliseconds or seconds.
ParseResult<std::chrono::nanoseconds> parse_duration(std::string_view text);

struct HoldSpec {
    bool forever = false;
    std::chrono::nanoseconds duration{0};
};

// A duration as for parse_duration(), or "inf" to hold until SIGINT/SIGTERM.
ParseResult<HoldSpec> parse_hold(std::string_view text);

ParseResult<Op> parse_op(std::string_view text);

struct PauseSpec {
    std::chrono::nanoseconds every{0};   // submitting time between pauses
    std::chrono::nanoseconds length{0};  // length of each pause
};

// Option values exactly as given on the command line; unset optionals mean "not given".
struct RawOptions {
    std::vector<std::string> rings;
    std::optional<std::string> op;
    std::optional<std::string> file;
    std::optional<std::string> duration;
    std::optional<std::string> pause_every;
    std::optional<std::string> pause_for;
    std::optional<std::string> hold;
    std::optional<std::string> cycles;
    std::optional<std::string> gap;
    bool json = false;
};

struct LoadConfig {
    std::vector<RingSpec> rings;  // expanded, see expand_ring_specs()
    Op op = Op::Nop;
    std::string file;  // empty unless given
    std::optional<std::chrono::nanoseconds> duration;
    std::optional<PauseSpec> pause;
    HoldSpec hold;
    // The whole run (create, submit, report, hold, close) this many times, with gap between:
    // rings that come and go, as event loops and short jobs make them.
    std::uint64_t cycles = 1;
    std::chrono::nanoseconds gap{0};
    bool json = false;
};

// Validates everything that can be decided without touching the system (the --file is not
// opened here).
ParseResult<LoadConfig> build_config(const RawOptions& raw);

// The first cpu= that names no CPU of a system with `cpus` configured CPUs, as a usage error
// message; nothing when all exist or `cpus` is unknown (<= 0). The kernel answers a nonexistent
// CPU with a bare EINVAL from io_uring_setup; this names the bad value instead. Offline CPUs are
// still left to the kernel.
std::optional<std::string> check_cpus(const LoadConfig& cfg, long cpus);

}  // namespace iouscope::load
