#include "ring_spec.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <system_error>

#include "common/duration.hpp"

namespace iouscope::load {

namespace {

std::string quoted(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 2);
    out += '"';
    out += text;
    out += '"';
    return out;
}

// Strict decimal parser: std::from_chars alone would accept a trailing suffix, and a leading '-'
// deserves its own message because "negative" is a common mistake worth naming.
ParseResult<std::uint64_t> parse_u64(std::string_view text, std::string_view what) {
    if (text.empty()) {
        return ParseError{std::string(what) + ": missing value"};
    }
    if (text.front() == '-') {
        return ParseError{std::string(what) + ": " + quoted(text) +
                          " is negative; only non-negative integers are allowed"};
    }
    std::uint64_t value = 0;
    const auto* first = text.data();
    const auto* last = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(first, last, value);
    if (ec == std::errc::result_out_of_range) {
        return ParseError{std::string(what) + ": " + quoted(text) + " is out of range"};
    }
    if (ec != std::errc() || ptr != last) {
        return ParseError{std::string(what) + ": " + quoted(text) +
                          " is not a non-negative integer"};
    }
    return value;
}

ParseResult<unsigned> parse_bounded(std::string_view text, std::string_view what, std::uint64_t lo,
                                    std::uint64_t hi) {
    auto parsed = parse_u64(text, what);
    if (auto* err = std::get_if<ParseError>(&parsed)) {
        return *err;
    }
    const std::uint64_t value = std::get<std::uint64_t>(parsed);
    if (value < lo || value > hi) {
        return ParseError{std::string(what) + ": " + quoted(text) + " is out of range (" +
                          std::to_string(lo) + ".." + std::to_string(hi) + ")"};
    }
    return static_cast<unsigned>(value);
}

std::optional<RingMode> parse_mode(std::string_view text) {
    for (RingMode mode :
         {RingMode::Plain, RingMode::Sqpoll, RingMode::Iopoll, RingMode::SqpollIopoll}) {
        if (text == mode_name(mode)) {
            return mode;
        }
    }
    return std::nullopt;
}

std::vector<std::string_view> split(std::string_view text, char sep) {
    std::vector<std::string_view> parts;
    std::size_t begin = 0;
    for (;;) {
        const std::size_t end = text.find(sep, begin);
        if (end == std::string_view::npos) {
            parts.push_back(text.substr(begin));
            return parts;
        }
        parts.push_back(text.substr(begin, end - begin));
        begin = end + 1;
    }
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

// One key=value item into `out`; an error message names the key and the value.
std::optional<std::string> apply_key(RingSpec& out, std::string_view key, std::string_view value,
                                     bool& idle_given) {
    const std::string what = std::string(key);
    if (key == "count" || key == "rate" || key == "share") {
        auto parsed = parse_u64(value, what);
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

    constexpr std::uint64_t kU32 = std::numeric_limits<std::uint32_t>::max();
    ParseResult<unsigned> parsed = ParseError{};
    if (key == "idle" || key == "idle_ns" || key == "cpu") {
        // cpu: the kernel field is a u32; whether the CPU exists is for io_uring_setup to judge.
        parsed = parse_bounded(value, what, 0, kU32);
    } else if (key == "depth") {
        parsed = parse_bounded(value, what, 1, kMaxDepth);
    } else if (key == "batch") {
        parsed = parse_bounded(value, what, 1, kU32);
    } else if (key == "n") {
        parsed = parse_bounded(value, what, 1, kMaxReplicas);
    } else {
        return "unknown key " + quoted(key) +
               " (expected count, rate, share, idle, idle_ns, cpu, depth, batch or n)";
    }
    if (auto* err = std::get_if<ParseError>(&parsed)) return err->message;
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
    } else {
        out.replicas = v;
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
    return std::nullopt;
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
        const bool flag = eq == std::string_view::npos && (item == "percpu" || item == "stats");
        if (eq == std::string_view::npos && !flag) {
            return fail(quoted(item) + " is neither key=value nor one of the flags percpu, stats");
        }
        const std::string_view key = item.substr(0, eq);
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
            return fail((flag ? "" : "key ") + quoted(key) + " given more than once");
        }
        seen.push_back(key);
        if (flag) {
            (key == "percpu" ? out.percpu : out.stats) = true;
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

ParseResult<std::chrono::nanoseconds> parse_duration(std::string_view text) {
    // One duration grammar for the whole project (common/duration), with messages for a CLI.
    if (text.empty())
        return ParseError{
            "empty duration (use a number with a unit: ns, us, ms, s, m or h, e.g. 500ms)"};
    if (text.front() == '-') return ParseError{"duration " + quoted(text) + " is negative"};
    if (auto d = iouscope::parse_duration(text)) return *d;
    return ParseError{
        "duration " + quoted(text) +
        " is not a number followed by a unit (use ns, us, ms, s, m or h, e.g. 500ms)"};
}

ParseResult<HoldSpec> parse_hold(std::string_view text) {
    if (text == "inf") {
        return HoldSpec{true, std::chrono::nanoseconds{0}};
    }
    auto parsed = parse_duration(text);
    if (auto* err = std::get_if<ParseError>(&parsed)) {
        return ParseError{"--hold: " + err->message + "; or use inf to hold until a signal"};
    }
    return HoldSpec{false, std::get<std::chrono::nanoseconds>(parsed)};
}

ParseResult<Op> parse_op(std::string_view text) {
    if (text == "nop") {
        return Op::Nop;
    }
    if (text == "read") {
        return Op::Read;
    }
    return ParseError{"unknown --op " + quoted(text) + " (expected nop or read)"};
}

ParseResult<LoadConfig> build_config(const RawOptions& raw) {
    LoadConfig cfg;
    cfg.json = raw.json;

    if (raw.rings.empty()) {
        return ParseError{"missing --ring: at least one --ring SPEC is required"};
    }
    auto rings = expand_ring_specs(raw.rings);
    if (auto* err = std::get_if<ParseError>(&rings)) {
        return *err;
    }
    cfg.rings = std::move(std::get<std::vector<RingSpec>>(rings));

    if (raw.op) {
        auto op = parse_op(*raw.op);
        if (auto* err = std::get_if<ParseError>(&op)) {
            return *err;
        }
        cfg.op = std::get<Op>(op);
    }
    if (raw.file) {
        if (raw.file->empty()) {
            return ParseError{"--file: empty path"};
        }
        cfg.file = *raw.file;
    }
    if (cfg.op == Op::Read && cfg.file.empty()) {
        return ParseError{"--op read requires --file PATH"};
    }

    const auto duration_option =
        [](const std::optional<std::string>& text,
           std::string_view name) -> ParseResult<std::optional<std::chrono::nanoseconds>> {
        if (!text) {
            return std::optional<std::chrono::nanoseconds>{};
        }
        auto parsed = parse_duration(*text);
        if (auto* err = std::get_if<ParseError>(&parsed)) {
            return ParseError{std::string(name) + ": " + err->message};
        }
        return std::optional{std::get<std::chrono::nanoseconds>(parsed)};
    };
    using OptNanos = std::optional<std::chrono::nanoseconds>;

    auto duration = duration_option(raw.duration, "--duration");
    if (auto* err = std::get_if<ParseError>(&duration)) {
        return *err;
    }
    cfg.duration = std::get<OptNanos>(duration);

    auto every = duration_option(raw.pause_every, "--pause-every");
    if (auto* err = std::get_if<ParseError>(&every)) {
        return *err;
    }
    auto length = duration_option(raw.pause_for, "--pause-for");
    if (auto* err = std::get_if<ParseError>(&length)) {
        return *err;
    }
    const OptNanos every_value = std::get<OptNanos>(every);
    const OptNanos length_value = std::get<OptNanos>(length);
    if (every_value.has_value() != length_value.has_value()) {
        return ParseError{"--pause-every and --pause-for must be given together"};
    }
    if (every_value) {
        if (every_value->count() <= 0) {
            return ParseError{"--pause-every: " + quoted(*raw.pause_every) +
                              " must be greater than zero"};
        }
        if (length_value->count() <= 0) {
            return ParseError{"--pause-for: " + quoted(*raw.pause_for) +
                              " must be greater than zero"};
        }
        cfg.pause = PauseSpec{*every_value, *length_value};
    }

    if (raw.hold) {
        auto hold = parse_hold(*raw.hold);
        if (auto* err = std::get_if<ParseError>(&hold)) {
            return *err;
        }
        cfg.hold = std::get<HoldSpec>(hold);
    }

    if (raw.cycles) {
        const auto& text = *raw.cycles;
        std::uint64_t n = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        if (ec != std::errc{} || end != text.data() + text.size() || n == 0 || n > 10'000'000) {
            return ParseError{"--cycles: " + quoted(text) + " is not a number from 1 to 10000000"};
        }
        cfg.cycles = n;
    }
    if (raw.gap) {
        auto gap = parse_duration(*raw.gap);
        if (auto* err = std::get_if<ParseError>(&gap)) {
            return ParseError{"--gap: " + err->message};
        }
        cfg.gap = std::get<std::chrono::nanoseconds>(gap);
    }
    if (raw.gap && cfg.cycles < 2) {
        return ParseError{"--gap is the pause between --cycles; give --cycles N (N >= 2) too"};
    }
    if (cfg.hold.forever && cfg.cycles > 1) {
        return ParseError{"--hold inf never ends a cycle; give a duration with --cycles"};
    }

    const bool any_count = std::any_of(cfg.rings.begin(), cfg.rings.end(),
                                       [](const RingSpec& r) { return r.count > 0; });
    if (!any_count && !cfg.duration) {
        return ParseError{
            "nothing ends the run: give --duration D or count=N on at least one ring"};
    }
    return cfg;
}

}  // namespace iouscope::load
