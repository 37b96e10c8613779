// The run-wide options of iouscope-load (config.hpp): durations, --op and --file, pauses, hold,
// cycles, and build_config(), which checks them in a fixed order so the first error reported is
// always the same one.
#include "config.hpp"

#include <algorithm>
#include <charconv>
#include <system_error>

#include "common/duration.hpp"
#include "parse_text.hpp"

namespace iouscope::load {

namespace {

using OptNanos = std::optional<std::chrono::nanoseconds>;
using Check = std::optional<ParseError>;

// An option that takes a duration, unset when not given; the message starts with its name.
ParseResult<OptNanos> parse_optional_duration(const std::optional<std::string>& text,
                                              std::string_view name) {
    if (!text) {
        return OptNanos{};
    }
    auto parsed = parse_duration(*text);
    if (auto* err = std::get_if<ParseError>(&parsed)) {
        return ParseError{std::string(name) + ": " + err->message};
    }
    return std::optional{std::get<std::chrono::nanoseconds>(parsed)};
}

Check take_rings(const RawOptions& raw, LoadConfig& cfg) {
    if (raw.rings.empty()) {
        return ParseError{"missing --ring: at least one --ring SPEC is required"};
    }
    auto rings = expand_ring_specs(raw.rings);
    if (auto* err = std::get_if<ParseError>(&rings)) {
        return *err;
    }
    cfg.rings = std::move(std::get<std::vector<RingSpec>>(rings));
    return std::nullopt;
}

Check take_op_and_file(const RawOptions& raw, LoadConfig& cfg) {
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
    for (std::size_t i = 0; i < cfg.rings.size(); ++i) {
        RingSpec& ring = cfg.rings[i];
        ring.op = ring.op.value_or(cfg.op);
        if (*ring.op == Op::Read && cfg.file.empty()) {
            return ParseError{"ring " + std::to_string(i) + ": op=read requires --file PATH"};
        }
        if (*ring.op == Op::Write && uses_iopoll(ring.mode)) {
            return ParseError{"ring " + std::to_string(i) +
                              ": op=write needs a mode without iopoll (its writes are buffered, "
                              "and an IOPOLL ring takes O_DIRECT I/O only)"};
        }
        if (ring.direct && *ring.op != Op::Write) {
            return ParseError{"ring " + std::to_string(i) +
                              ": direct needs op=write (reads are O_DIRECT already)"};
        }
        if (ring.bufs > 0 && *ring.op != Op::Read) {
            return ParseError{"ring " + std::to_string(i) +
                              ": bufs= needs op=read (the reads select the provided buffers)"};
        }
    }
    return std::nullopt;
}

Check take_duration(const RawOptions& raw, LoadConfig& cfg) {
    auto duration = parse_optional_duration(raw.duration, "--duration");
    if (auto* err = std::get_if<ParseError>(&duration)) {
        return *err;
    }
    cfg.duration = std::get<OptNanos>(duration);
    return std::nullopt;
}

Check take_pause(const RawOptions& raw, LoadConfig& cfg) {
    auto every = parse_optional_duration(raw.pause_every, "--pause-every");
    if (auto* err = std::get_if<ParseError>(&every)) {
        return *err;
    }
    auto length = parse_optional_duration(raw.pause_for, "--pause-for");
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
    return std::nullopt;
}

Check take_hold(const RawOptions& raw, LoadConfig& cfg) {
    if (raw.hold) {
        auto hold = parse_hold(*raw.hold);
        if (auto* err = std::get_if<ParseError>(&hold)) {
            return *err;
        }
        cfg.hold = std::get<HoldSpec>(hold);
    }
    return std::nullopt;
}

Check take_cycles(const RawOptions& raw, LoadConfig& cfg) {
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
    return std::nullopt;
}

Check check_run_ends(const RawOptions&, LoadConfig& cfg) {
    const bool any_count = std::any_of(cfg.rings.begin(), cfg.rings.end(),
                                       [](const RingSpec& r) { return r.count > 0; });
    if (!any_count && !cfg.duration) {
        return ParseError{
            "nothing ends the run: give --duration D or count=N on at least one ring"};
    }
    return std::nullopt;
}

}  // namespace

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
    if (text == "write") {
        return Op::Write;
    }
    return ParseError{"unknown --op " + quoted(text) + " (expected nop, read or write)"};
}

ParseResult<LoadConfig> build_config(const RawOptions& raw) {
    // In this order: the first rule broken is the one reported.
    constexpr Check (*kSteps[])(const RawOptions&, LoadConfig&) = {
        take_rings, take_op_and_file, take_duration,  take_pause,
        take_hold,  take_cycles,      check_run_ends,
    };
    LoadConfig cfg;
    cfg.json = raw.json;
    for (const auto step : kSteps) {
        if (auto err = step(raw, cfg)) {
            return *err;
        }
    }
    return cfg;
}

std::optional<std::string> check_cpus(const LoadConfig& cfg, long cpus) {
    if (cpus <= 0) {
        return std::nullopt;
    }
    for (std::size_t i = 0; i < cfg.rings.size(); ++i) {
        const auto& cpu = cfg.rings[i].cpu;
        if (cpu && *cpu >= static_cast<unsigned long>(cpus)) {
            return "ring " + std::to_string(i) + ": cpu=" + std::to_string(*cpu) +
                   " does not exist (this system has CPUs 0.." + std::to_string(cpus - 1) + ")";
        }
    }
    return std::nullopt;
}

}  // namespace iouscope::load
