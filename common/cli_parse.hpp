#pragma once
// The one way iouscoped and the iouscope subcommands turn CLI11's outcome into their result
// structs (fields output and exit_code): help text with status 0, a parse error with status 2.
#include <CLI/CLI.hpp>
#include <string>

namespace iouscope::cli {

// Parses into `app`; returns true to go on. Otherwise `r` holds the help or the error.
template <typename Result>
bool parse_or_answer(CLI::App& app, int argc, const char* const* argv, const std::string& prog,
                     Result& r) {
    try {
        app.parse(argc, argv);
        return true;
    } catch (const CLI::CallForHelp&) {
        r.output = app.help();
    } catch (const CLI::ParseError& e) {
        r.exit_code = 2;
        r.output = prog + ": " + e.what() + "\nTry '" + prog + " --help'.";
    }
    return false;
}

}  // namespace iouscope::cli
