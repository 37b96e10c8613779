// Command-line model of iouscope-load: ring SPEC strings, durations and the whole validated run
// configuration. Everything here is pure (no I/O, no exit, no printing) so the rules that decide
// what counts as bad input can be unit-tested without root or io_uring.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace iouscope::load {

enum class RingMode { Plain, Sqpoll, Iopoll, SqpollIopoll };

enum class Op { Nop, Read };

// A separate type rather than a bare std::string so that ParseResult<std::string> would still be
// unambiguous and call sites read as what they test.
struct ParseError {
    std::string message;
};

template <typename T>
using ParseResult = std::variant<T, ParseError>;

inline constexpr unsigned kDefaultDepth = 64;
// IORING_MAX_ENTRIES; larger requests fail in io_uring_setup with an unhelpful EINVAL.
inline constexpr unsigned kMaxDepth = 32768;
inline constexpr unsigned kDefaultBatch = 32;
inline constexpr unsigned kDefaultIdleMs = 10;
// Guards against a typo such as n=1000000 silently trying to create a million rings and threads.
inline constexpr unsigned kMaxReplicas = 100000;

struct RingSpec {
    RingMode mode = RingMode::Plain;
    std::uint64_t count = 0;  // 0 = unbounded
    std::uint64_t rate = 0;   // SQEs per second, 0 = unlimited
    // Index into the expanded ring list (the index= printed in the report), not into --ring order.
    std::optional<std::size_t> share;
    // Effective sq_thread_idle. For a shared ring, expand_ring_specs() copies the owner's value:
    // the kernel raises a shared SQ thread's idle time to the maximum over its rings, and a ring
    // attached with 0 would count as the kernel default of one second.
    unsigned idle_ms = kDefaultIdleMs;
    std::optional<unsigned> cpu;
    // The seeds kernel's flags (include/iouscope/seeds_uapi.h); other kernels refuse them.
    // idle_ns replaces idle_ms when set (IORING_SETUP_IDLE_NS) and is copied to shared rings too.
    std::optional<std::uint32_t> idle_ns;
    bool percpu = false;  // IORING_SETUP_SQPOLL_PERCPU: the per-CPU SQ thread of cpu=
    bool stats = false;   // IORING_SETUP_SQTHREAD_STATS: the SQ thread accounts its work time
    unsigned depth = kDefaultDepth;
    unsigned batch = kDefaultBatch;  // already clamped to depth
    unsigned replicas = 1;           // n=; expand_ring_specs() resets it to 1 on every copy
};

bool uses_sqpoll(RingMode mode);
bool uses_iopoll(RingMode mode);
// The MODE spelling accepted on the command line ("sqpoll+iopoll", ...).
std::string_view mode_name(RingMode mode);

// Parses one SPEC ("MODE[,key=value...]"). Cross-ring rules (share=I) are not checked here.
ParseResult<RingSpec> parse_ring_spec(std::string_view spec);

// Parses every --ring value in order, expands n= replicas and checks share= references. The
// result has one element per ring that will be created, in creation order.
ParseResult<std::vector<RingSpec>> expand_ring_specs(const std::vector<std::string>& specs);

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

}  // namespace iouscope::load
