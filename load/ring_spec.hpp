// Command-line model of iouscope-load, its rings: the ring SPEC strings and the expanded list of
// rings a run creates (config.hpp holds the rest of the run's configuration). Everything here is
// pure (no I/O, no exit, no printing) so the rules that decide what counts as bad input can be
// unit-tested without root or io_uring.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace iouscope::load {

enum class RingMode { Plain, Sqpoll, Iopoll, SqpollIopoll };

// What a ring submits: NOPs, 4 KiB O_DIRECT reads of the --file, or 4 KiB buffered writes to a
// scratch file of the process's own. The run's --op, or op= per ring.
enum class Op { Nop, Read, Write };

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
// overflow=K and stuck=N; stuck= must also leave the CQ room for depth completions.
inline constexpr unsigned kMaxOverflow = 1000000;
inline constexpr unsigned kMaxStuck = 4096;  // stuck= and blocked= alike
inline constexpr unsigned kMaxWorkers = 1024;
// cq=: the kernel's largest CQ (2 x IORING_MAX_ENTRIES). bufs=: a buffer ring's largest size.
inline constexpr unsigned kMaxCqEntries = 65536;
inline constexpr unsigned kMaxBufs = 32768;

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
    // op=; unset means the run's --op, which build_config() fills in, so every ring of a
    // LoadConfig has one.
    std::optional<Op> op;
    bool async = false;  // IOSQE_ASYNC on every SQE: the kernel punts each one to io-wq
    // NOPs beyond cq_entries_for(depth) posted once at the start before any is reaped: with
    // the default CQ that many overflow, with cq= what the burst exceeds the CQ by.
    unsigned overflow = 0;
    unsigned stuck = 0;    // reads of a pipe nobody writes, in flight until the ring closes
    unsigned blocked = 0;  // splices from that pipe, each blocking an io-wq worker as long
    // IORING_REGISTER_IOWQ_MAX_WORKERS for both accounts, right after setup; 0 = the kernel's.
    unsigned max_workers = 0;
    unsigned cq = 0;      // IORING_SETUP_CQSIZE; 0 = the kernel's, twice the SQ
    bool direct = false;  // op=write: O_DIRECT writes, to a scratch file of their own
    unsigned bufs = 0;    // op=read: a provided-buffer ring of this many 4 KiB buffers
    // Every second, this many splices that each block an io-wq worker until released 20 ms
    // later: a burst's workers, idle the rest of the time. The ring submits nothing else.
    unsigned fanout = 0;
    // N reads in flight, each on a pipe of the ring's own that a writer thread feeds a byte at a
    // time, in turn, at rate= bytes a second: completions by task work (load/pipe_ring.hpp).
    unsigned pipes = 0;
    // IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN (6.1+), pipes= rings only.
    bool defer = false;
    // pipes= rings only: the ring's thread computes in user space this percent of every
    // millisecond and sleeps the rest, reaping between, instead of waiting in the kernel.
    unsigned busy = 0;
    // IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG (5.19+), pipes= rings only.
    bool coop = false;
};

bool uses_sqpoll(RingMode mode);
bool uses_iopoll(RingMode mode);
// The MODE spelling accepted on the command line ("sqpoll+iopoll", ...).
std::string_view mode_name(RingMode mode);
// "nop" or "read", as op= and --op spell it.
std::string_view op_name(Op op);
// The ring's operation once build_config() has filled in --op (NOPs before that).
inline Op ring_op(const RingSpec& spec) {
    return spec.op.value_or(Op::Nop);
}
// The CQ size io_uring_setup gives a ring of `depth` entries without IORING_SETUP_CQSIZE: twice
// the SQ, which is depth rounded up to a power of two.
unsigned cq_entries_for(unsigned depth);
// The CQ size the ring gets: cq= rounded up to a power of two, or cq_entries_for(depth).
unsigned ring_cq_entries(const RingSpec& spec);
// The NOPs overflow=K posts before reaping any: cq_entries_for(depth) + K, 0 without it.
std::uint64_t overflow_burst(const RingSpec& spec);
// The CQEs overflow= sends through the overflow list: what its burst exceeds the CQ by.
unsigned overflow_expected(const RingSpec& spec);

// Parses one SPEC ("MODE[,key=value...]"). Cross-ring rules (share=I) are not checked here.
ParseResult<RingSpec> parse_ring_spec(std::string_view spec);

// Parses every --ring value in order, expands n= replicas and checks share= references. The
// result has one element per ring that will be created, in creation order.
ParseResult<std::vector<RingSpec>> expand_ring_specs(const std::vector<std::string>& specs);

}  // namespace iouscope::load
