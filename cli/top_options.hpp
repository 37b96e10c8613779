#pragma once
// Command line of `iouscope top`, parsed without side effects for unit tests.
#include <optional>
#include <string>

#include "cli/top_view.hpp"

namespace iouscope::top {

struct Options {
    bool batch = false;          // -b: text snapshots to stdout, no terminal
    int iterations = 0;          // -n: snapshots to print in batch mode, 0 = until interrupted
    double delay_seconds = 1.0;  // -d: refresh interval
    bool json = false;           // --json: JSON lines instead of text (implies batch)
    std::string daemon_url = "http://127.0.0.1:10464";
    bool local = false;  // --local: never ask the daemon, sample in-process
    Column sort = Column::cpu;
    View view = View::threads;  // --view: the view to start in (batch mode prints it)
    std::string filter;
    int width = 0;  // batch output width, 0 = $COLUMNS or 160
    // --limit: thread rows (rings in the IOPOLL and requests views) listed, the rest summed up in a
    // line. -1 = the mode's default: kBatchLimit in batch mode, what fits on the screen otherwise;
    // 0 = all.
    int limit = -1;
    int rings_per_thread = 5;  // --rings-per-thread: rings listed under a thread, 0 = all
};

inline constexpr int kBatchLimit = 20;

struct OptionsResult {
    std::optional<Options> options;
    int exit_code = 0;
    std::string output;  // help text, or an error message
};

// argv[0] is "top" (the subcommand).
OptionsResult parse_top_options(int argc, const char* const* argv);

}  // namespace iouscope::top
