#pragma once
// `iouscope advise`: command line and text rendering, pure for unit tests; advise_run.cpp
// fetches the snapshots.
#include <optional>
#include <string>

#include "model/advice.hpp"
#include "model/snapshot.hpp"

namespace iouscope::advise {

struct Options {
    std::string daemon_url = "http://127.0.0.1:10464";
    bool local = false;                  // --local: sample in-process for --duration
    double duration_seconds = 15;        // --duration: window of an in-process run
    std::optional<std::uint32_t> pid;    // --pid: only findings about this process
    std::optional<std::int32_t> thread;  // --thread: only findings about this SQ thread
    bool json = false;
    double wake_weight = 100;  // --wake-weight, see AdviseOptions
};

struct OptionsResult {
    std::optional<Options> options;
    int exit_code = 0;
    std::string output;  // help text or an error
};

// argv[0] is "advise".
OptionsResult parse_options(int argc, const char* const* argv);

// Keeps the findings about `pid`/`thread`. Returns an error message if the snapshot has no such
// process or SQ thread at all, so a typo is not mistaken for a healthy system.
std::optional<std::string> filter_findings(const Snapshot& snap, const Options& o, Advice& advice);

std::string render_text(const Advice& advice, const Snapshot& snap);

// Runs the command (cli/advise_run.cpp); returns the exit status documented in --help.
int run(const Options& o);

}  // namespace iouscope::advise
