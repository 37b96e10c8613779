// argv into iouscope-load's RawOptions through CLI11 (command_line.hpp).
#include "command_line.hpp"

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <utility>

namespace iouscope::load {

CommandLine parse_command_line(int argc, const char* const* argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            return HelpRequest{};
        }
    }

    RawOptions raw;
    std::string op, file, duration, pause_every, pause_for, hold, cycles, gap;
    CLI::App app{"io_uring load generator", kProg};
    // help_text() is printed by hand because CLI11's generated help cannot carry the SPEC
    // grammar, examples and exit status in a readable layout.
    app.set_help_flag();
    app.allow_extras(false);
    app.add_option("--ring", raw.rings)->allow_extra_args(false);
    auto* op_opt = app.add_option("--op", op);
    auto* file_opt = app.add_option("--file", file);
    auto* duration_opt = app.add_option("--duration", duration);
    auto* every_opt = app.add_option("--pause-every", pause_every);
    auto* for_opt = app.add_option("--pause-for", pause_for);
    auto* hold_opt = app.add_option("--hold", hold);
    auto* cycles_opt = app.add_option("--cycles", cycles);
    auto* gap_opt = app.add_option("--gap", gap);
    app.add_flag("--json", raw.json);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return ParseError{e.what()};
    }

    const auto take = [](CLI::Option* opt, std::string& value) {
        return opt->count() > 0 ? std::optional<std::string>(std::move(value)) : std::nullopt;
    };
    raw.op = take(op_opt, op);
    raw.file = take(file_opt, file);
    raw.duration = take(duration_opt, duration);
    raw.pause_every = take(every_opt, pause_every);
    raw.pause_for = take(for_opt, pause_for);
    raw.hold = take(hold_opt, hold);
    raw.cycles = take(cycles_opt, cycles);
    raw.gap = take(gap_opt, gap);
    return raw;
}

}  // namespace iouscope::load
