// The ring SPEC grammar of iouscope-load: MODE[,key=value...], the rules between a spec's keys
// (seeds kernel flags included) and the expansion of n= replicas and share= references into the
// list of rings a run creates.
#include "ring_spec.hpp"

#include <algorithm>
#include <bit>
#include <iterator>
#include <limits>

#include "parse_text.hpp"

namespace iouscope::load {

namespace {

std::optional<RingMode> parse_mode(std::string_view text) {
    for (RingMode mode :
         {RingMode::Plain, RingMode::Sqpoll, RingMode::Iopoll, RingMode::SqpollIopoll}) {
        if (text == mode_name(mode)) {
            return mode;
        }
    }
    return std::nullopt;
}

}  // namespace

bool uses_sqpoll(RingMode mode) {
    return mode == RingMode::Sqpoll || mode == RingMode::SqpollIopoll;
}

bool uses_iopoll(RingMode mode) {
    return mode == RingMode::Iopoll || mode == RingMode::SqpollIopoll;
}

std::string_view mode_name(RingMode mode) {
    switch (mode) {
        case RingMode::Plain:
            return "plain";
        case RingMode::Sqpoll:
            return "sqpoll";
        case RingMode::Iopoll:
            return "iopoll";
        case RingMode::SqpollIopoll:
            return "sqpoll+iopoll";
    }
    return "?";
}

std::string_view op_name(Op op) {
    return op == Op::Read ? "read" : op == Op::Write ? "write" : "nop";
}

unsigned cq_entries_for(unsigned depth) {
    return 2 * std::bit_ceil(depth);
}

unsigned ring_cq_entries(const RingSpec& spec) {
    return spec.cq > 0 ? std::bit_ceil(spec.cq) : cq_entries_for(spec.depth);
}

std::uint64_t overflow_burst(const RingSpec& spec) {
    return spec.overflow == 0 ? 0 : std::uint64_t{cq_entries_for(spec.depth)} + spec.overflow;
}

unsigned overflow_expected(const RingSpec& spec) {
    const std::uint64_t burst = overflow_burst(spec);
    const unsigned cq = ring_cq_entries(spec);
    return burst > cq ? static_cast<unsigned>(burst - cq) : 0;
}

namespace {

// The rules of the seeds kernel's flags, as its patches enforce them or as they would surprise.
std::optional<std::string> check_seeds_flags(const RingSpec& out, bool idle_given) {
    const bool sqpoll = uses_sqpoll(out.mode);
    if (out.idle_ns && (!sqpoll || out.share || idle_given)) {
        return "idle_ns= needs an sqpoll mode without share= or idle= (it is the SQ thread's "
               "idle time in nanoseconds, IORING_SETUP_IDLE_NS)";
    }
    if (out.percpu && (!sqpoll || !out.cpu || out.share)) {
        return "percpu needs an sqpoll mode with cpu=N and without share= (the kernel finds the "
               "shared SQ thread by its CPU, IORING_SETUP_SQPOLL_PERCPU)";
    }
    if (out.stats && !sqpoll) {
        return "stats needs an sqpoll mode (it turns on the SQ thread's work-time accounting, "
               "IORING_SETUP_SQTHREAD_STATS)";
    }
    return std::nullopt;
}

// A key whose value is an unsigned number within the key's range into `out`; false if `key` is
// none of them.
bool apply_unsigned_key(RingSpec& out, std::string_view key, std::string_view value,
                        bool& idle_given, std::optional<std::string>& error) {
    constexpr std::uint64_t kU32 = std::numeric_limits<std::uint32_t>::max();
    struct Key {
        std::string_view name;
        std::uint64_t lo, hi;
    };
    // cpu: the kernel field is a u32; whether the CPU exists is for io_uring_setup to judge.
    constexpr Key kKeys[] = {
        {"idle", 0, kU32},
        {"idle_ns", 0, kU32},
        {"cpu", 0, kU32},
        {"depth", 1, kMaxDepth},
        {"batch", 1, kU32},
        {"n", 1, kMaxReplicas},
        {"overflow", 1, kMaxOverflow},
        {"stuck", 1, kMaxStuck},
        {"blocked", 1, kMaxStuck},
        {"max_workers", 1, kMaxWorkers},
        {"cq", 1, kMaxCqEntries},
        {"bufs", 1, kMaxBufs},
        {"fanout", 1, kMaxWorkers},
        {"pipes", 1, kMaxStuck},
        {"busy", 1, 100},
    };
    const auto* k = std::find_if(std::begin(kKeys), std::end(kKeys),
                                 [&](const Key& x) { return x.name == key; });
    if (k == std::end(kKeys)) {
        return false;
    }
    const auto parsed = parse_bounded(value, key, k->lo, k->hi);
    if (const auto* err = std::get_if<ParseError>(&parsed)) {
        error = err->message;
        return true;
    }
    const unsigned v = std::get<unsigned>(parsed);
    if (key == "idle") {
        out.idle_ms = v;
        idle_given = true;
    } else if (key == "idle_ns") {
        out.idle_ns = v;
    } else if (key == "cpu") {
        out.cpu = v;
    } else if (key == "depth") {
        out.depth = v;
    } else if (key == "batch") {
        out.batch = v;
    } else if (key == "n") {
        out.replicas = v;
    } else if (key == "overflow") {
        out.overflow = v;
    } else if (key == "stuck") {
        out.stuck = v;
    } else if (key == "blocked") {
        out.blocked = v;
    } else if (key == "cq") {
        out.cq = v;
    } else if (key == "bufs") {
        out.bufs = v;
    } else if (key == "fanout") {
        out.fanout = v;
    } else if (key == "pipes") {
        out.pipes = v;
    } else if (key == "busy") {
        out.busy = v;
    } else {
        out.max_workers = v;
    }
    return true;
}

// One key=value item into `out`; an error message names the key and the value.
std::optional<std::string> apply_key(RingSpec& out, std::string_view key, std::string_view value,
                                     bool& idle_given) {
    if (key == "count" || key == "rate" || key == "share") {
        auto parsed = parse_u64(value, key);
        if (auto* err = std::get_if<ParseError>(&parsed)) return err->message;
        const std::uint64_t v = std::get<std::uint64_t>(parsed);
        if (key == "count") {
            out.count = v;
        } else if (key == "rate") {
            out.rate = v;
        } else {
            if (v > std::numeric_limits<std::size_t>::max())
                return "share: " + quoted(value) + " is out of range";
            out.share = static_cast<std::size_t>(v);
        }
        return std::nullopt;
    }
    if (key == "op") {
        for (Op op : {Op::Nop, Op::Read, Op::Write}) {
            if (value == op_name(op)) {
                out.op = op;
                return std::nullopt;
            }
        }
        return "op: " + quoted(value) + " is not an operation (expected nop, read or write)";
    }
    std::optional<std::string> error;
    if (!apply_unsigned_key(out, key, value, idle_given, error)) {
        return "unknown key " + quoted(key) +
               " (expected count, rate, share, idle, idle_ns, cpu, depth, batch, n, op, "
               "overflow, stuck, blocked, max_workers, cq, bufs, fanout, pipes or busy)";
    }
    return error;
}

// The rules of async, overflow= and stuck=: each must leave the ring's counts exact.
std::optional<std::string> check_extras(const RingSpec& out) {
    if (out.overflow > 0 && out.async) {
        return "overflow= cannot be combined with async (io-wq completes the NOPs at times "
               "that cannot be seen without reaping, so the number that overflow would not be "
               "exact)";
    }
    if (out.overflow > 0 && uses_iopoll(out.mode)) {
        return "overflow= needs a mode without iopoll (an IOPOLL ring's completions depend on "
               "polling, so the number that overflow would not be exact)";
    }
    if (out.stuck > 0 && uses_iopoll(out.mode)) {
        return "stuck= needs a mode without iopoll (a pipe cannot be read on an IOPOLL ring)";
    }
    if (out.blocked > 0 && out.mode != RingMode::Plain) {
        return "blocked= needs mode plain (its splices block io-wq workers of the thread that "
               "submits them, which is the SQ thread in sqpoll modes)";
    }
    if (out.cq > 0 && out.cq < out.depth) {
        return "cq=" + std::to_string(out.cq) +
               " is smaller than depth=" + std::to_string(out.depth) +
               " (the kernel wants a CQ at least as large as the SQ)";
    }
    if (out.bufs > 0 && uses_iopoll(out.mode)) {
        return "bufs= needs a mode without iopoll (its reads select a provided buffer, which "
               "this load keeps to inline and io-wq issue)";
    }
    if (out.fanout > 0 && (out.mode != RingMode::Plain || out.count > 0 || out.rate > 0 ||
                           out.async || out.overflow > 0 || out.bufs > 0)) {
        return "fanout= needs mode plain without count=, rate=, async, overflow= or bufs= (the "
               "ring submits only its bursts of splices, from the thread whose io-wq runs them)";
    }
    if (out.pipes > 0 &&
        (out.mode != RingMode::Plain || out.rate == 0 || out.count > 0 || out.async ||
         out.overflow > 0 || out.bufs > 0 || out.fanout > 0 || out.stuck > 0 || out.blocked > 0 ||
         out.op.value_or(Op::Nop) != Op::Nop)) {
        return "pipes= needs mode plain with rate= (the bytes a second its writer writes) and "
               "without count=, op=, async, overflow=, bufs=, fanout=, stuck= or blocked= (the "
               "ring submits only its pipe reads)";
    }
    if (out.pipes > out.depth) {
        return "pipes=" + std::to_string(out.pipes) +
               " is more than depth=" + std::to_string(out.depth) +
               " (a read of every pipe is in flight at once)";
    }
    if (out.defer && out.pipes == 0) {
        return "defer needs pipes= (only the pipe reads are submitted from the thread that "
               "enables the ring, which IORING_SETUP_SINGLE_ISSUER requires)";
    }
    if ((out.coop || out.busy > 0) && out.pipes == 0) {
        return std::string(out.coop ? "coop" : "busy=") +
               " needs pipes= (it changes how the ring's thread reaps its pipe reads)";
    }
    if (out.coop && out.defer) {
        return "coop cannot be combined with defer (DEFER_TASKRUN runs task work only when the "
               "thread waits, so there is nothing left to make cooperative)";
    }
    if (out.fanout > out.depth) {
        return "fanout=" + std::to_string(out.fanout) +
               " is more than depth=" + std::to_string(out.depth) +
               " (a burst's splices are in flight at once)";
    }
    const std::uint64_t cq = ring_cq_entries(out);
    const std::uint64_t parked = std::uint64_t{out.stuck} + out.blocked;
    if (parked > 0 && parked + out.depth > cq) {
        return "stuck=" + std::to_string(out.stuck) +
               " and blocked=" + std::to_string(out.blocked) +
               " with depth=" + std::to_string(out.depth) +
               " do not fit the CQ: stuck + blocked + depth must be at most cq_entries, " +
               std::to_string(cq) +
               " here (cq=, or twice depth rounded up to a power of two); lower them or raise "
               "depth= or cq=";
    }
    return std::nullopt;
}

// The rules between keys of one spec.
std::optional<std::string> check_combination(const RingSpec& out, bool idle_given) {
    const bool sqpoll = uses_sqpoll(out.mode);
    if (out.share && !sqpoll)
        return "share= needs an sqpoll mode (only SQPOLL rings have an SQ thread to share)";
    if (idle_given && !sqpoll)
        return "idle= needs an sqpoll mode (sq_thread_idle only applies to an SQ thread)";
    if (idle_given && out.share)
        return "idle= cannot be combined with share= (the shared SQ thread's idle time is set by "
               "the ring that owns it)";
    if (out.cpu && !sqpoll) return "cpu= needs an sqpoll mode (it pins the SQ thread)";
    if (auto err = check_seeds_flags(out, idle_given)) return err;
    if (out.cpu && out.share)
        return "cpu= cannot be combined with share= (the kernel ignores affinity when attaching "
               "to an existing SQ thread)";
    return check_extras(out);
}

}  // namespace

ParseResult<RingSpec> parse_ring_spec(std::string_view spec) {
    const std::string where = "ring spec " + quoted(spec);
    const auto fail = [&](const std::string& msg) { return ParseError{where + ": " + msg}; };

    const auto parts = split(spec, ',');
    RingSpec out;
    const auto mode = parse_mode(parts.front());
    if (!mode) {
        if (parts.front().empty()) {
            return fail("missing MODE (expected sqpoll, plain, iopoll or sqpoll+iopoll)");
        }
        return fail("unknown mode " + quoted(parts.front()) +
                    " (expected sqpoll, plain, iopoll or sqpoll+iopoll)");
    }
    out.mode = *mode;

    std::vector<std::string_view> seen;
    bool idle_given = false;
    for (std::size_t i = 1; i < parts.size(); ++i) {
        const std::string_view item = parts[i];
        if (item.empty()) {
            return fail("empty key=value item (stray comma?)");
        }
        const std::size_t eq = item.find('=');
        const bool flag = eq == std::string_view::npos &&
                          (item == "percpu" || item == "stats" || item == "async" ||
                           item == "direct" || item == "defer" || item == "coop");
        if (eq == std::string_view::npos && !flag) {
            return fail(quoted(item) +
                        " is neither key=value nor one of the flags percpu, stats, async, "
                        "direct, defer, coop");
        }
        const std::string_view key = item.substr(0, eq);
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
            return fail((flag ? "" : "key ") + quoted(key) + " given more than once");
        }
        seen.push_back(key);
        if (flag) {
            (key == "percpu"  ? out.percpu
             : key == "stats" ? out.stats
             : key == "async" ? out.async
             : key == "defer" ? out.defer
             : key == "coop"  ? out.coop
                              : out.direct) = true;
        } else if (auto err = apply_key(out, key, item.substr(eq + 1), idle_given)) {
            return fail(*err);
        }
    }
    if (auto err = check_combination(out, idle_given)) {
        return fail(*err);
    }
    out.batch = std::min(out.batch, out.depth);
    return out;
}

ParseResult<std::vector<RingSpec>> expand_ring_specs(const std::vector<std::string>& specs) {
    std::vector<RingSpec> rings;
    for (std::size_t arg = 0; arg < specs.size(); ++arg) {
        auto parsed = parse_ring_spec(specs[arg]);
        if (auto* err = std::get_if<ParseError>(&parsed)) {
            return ParseError{"--ring #" + std::to_string(arg + 1) + ": " + err->message};
        }
        RingSpec spec = std::get<RingSpec>(parsed);
        const std::size_t first_index = rings.size();
        if (spec.share) {
            const std::size_t owner = *spec.share;
            const std::string where = "--ring #" + std::to_string(arg + 1) + " " +
                                      quoted(specs[arg]) + ": share=" + std::to_string(owner);
            if (owner >= first_index) {
                return ParseError{
                    where + " does not name an earlier ring (this spec creates ring " +
                    std::to_string(first_index) +
                    (first_index == 0 ? ", the first one)"
                     : first_index == 1
                         ? "; the only earlier ring is 0)"
                         : "; earlier rings are 0.." + std::to_string(first_index - 1) + ")")};
            }
            if (!uses_sqpoll(rings[owner].mode)) {
                return ParseError{where + " names ring " + std::to_string(owner) + ", which is " +
                                  std::string(mode_name(rings[owner].mode)) +
                                  ", not an sqpoll ring"};
            }
            spec.idle_ms = rings[owner].idle_ms;
            spec.idle_ns = rings[owner].idle_ns;
        }
        if (rings.size() + spec.replicas > kMaxReplicas) {
            return ParseError{"--ring #" + std::to_string(arg + 1) + ": more than " +
                              std::to_string(kMaxReplicas) + " rings in total"};
        }
        const unsigned copies = spec.replicas;
        spec.replicas = 1;
        rings.insert(rings.end(), copies, spec);
    }
    return rings;
}

}  // namespace iouscope::load
