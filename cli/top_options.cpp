#include "cli/top_options.hpp"

#include <CLI/CLI.hpp>

#include "common/cli_parse.hpp"

namespace iouscope::top {

namespace {

const char* const kDescription =
    R"(iouscope top - live view of io_uring SQ threads, rings and polling

Shows every SQ thread with its CPU split into useful work, idle spinning and sleep, its sleep and
wake rates and wake latency, how many rings it serves and how fairly. Enter lists a thread's
rings; Tab switches to the IOPOLL view, then to the requests view (the request tier's rings:
opcode mix, latency, punts, io-wq workers, SQEs per enter, CQ overflow, stuck requests, those
with stuck requests first). Batch mode lists every thread's rings. Where there are
more threads or rings than --limit, --rings-per-thread or the screen hold, the first by the sort
order are listed and one line sums up the rest.

Snapshots come from a running iouscoped (--daemon, its /api/v1/snapshot endpoint). When no
daemon answers, top loads the same BPF collector itself, which needs root.)";

const char* const kFooter = R"(KEYS
  q quit   Tab threads/IOPOLL/requests   Enter expand a thread's rings   Up/Down PgUp/PgDn
  Home/End select
  < > change sort column   r reverse   / filter by pid, tid, comm, container or pod   p pause
  + - refresh interval   h ? help

EXAMPLES
  iouscope top
  iouscope top -b -n 3 -d 0.5          three text snapshots, half a second apart
  iouscope top -b -n 1 --limit 0       one snapshot of every SQ thread and all its rings
  iouscope top --json -n 10 | jq .     JSON lines, one per snapshot
  iouscope top --local --sort spin     no daemon: sample in-process, busiest spinners first
  iouscope top -b -n 1 --view requests the request tier's rings, stuck requests first

EXIT STATUS
  0 normal exit   1 no snapshot source (no daemon and not root), or a fetch failed in batch
  mode   2 bad command line)";

}  // namespace

OptionsResult parse_top_options(int argc, const char* const* argv) {
    Options o;
    std::string sort = "cpu";
    std::string view = "threads";
    CLI::App app{kDescription, "iouscope top"};
    app.footer(kFooter);
    app.get_formatter()->column_width(30);
    app.add_flag("-b,--batch", o.batch, "Batch mode: print text snapshots to stdout and exit.");
    app.add_option("-n,--iterations", o.iterations,
                   "Snapshots to print in batch mode (default: until interrupted).")
        ->check(CLI::Range(1, 1000000));
    app.add_option("-d,--delay", o.delay_seconds, "Seconds between refreshes, 0.1 to 3600.")
        ->check(CLI::Range(0.1, 3600.0))
        ->default_str("1");
    app.add_flag("--json", o.json, "Print snapshots as JSON lines (implies -b).");
    app.add_option("--daemon", o.daemon_url, "Base URL of iouscoped.")->default_str(o.daemon_url);
    app.add_flag("--local", o.local, "Do not ask a daemon; sample in this process (root).");
    app.add_option("--sort", sort,
                   "Sort column: tid pid comm cpu work spin sleep sleeps wakes p50 p99 rings "
                   "sqes fairness.")
        ->default_str("cpu");
    app.add_option("--filter", o.filter,
                   "Show only threads whose pid or tid is this, or whose comm or container id "
                   "contains it, or whose pod UID starts with it.");
    app.add_option("--width", o.width, "Line width in batch mode (default $COLUMNS or 160).")
        ->check(CLI::Range(40, 1000));
    app.add_option(
           "--limit", o.limit,
           "SQ threads listed (rings in the IOPOLL and requests views), the first by the sort "
           "column; one line sums up the rest. Default 20 in batch mode, what fits on "
           "the screen otherwise; 0 lists all.")
        ->check(CLI::Range(0, 1000000));
    app.add_option("--view", view,
                   "The view to start in (batch mode prints it): threads, polling (IOPOLL rings "
                   "and NVMe devices) or requests (the request tier's rings).")
        ->check(CLI::IsMember({"threads", "polling", "requests"}))
        ->default_str("threads");
    app.add_option("--rings-per-thread", o.rings_per_thread,
                   "Rings listed under an SQ thread, the most SQEs first; one line sums up the "
                   "rest. 0 lists all.")
        ->check(CLI::Range(0, 1000000))
        ->default_str("5");

    OptionsResult r;
    if (!cli::parse_or_answer(app, argc, argv, "iouscope top", r)) return r;
    auto col = column_by_name(sort);
    if (!col || *col == Column::history) {
        r.exit_code = 2;
        r.output = "iouscope top: unknown sort column \"" + sort +
                   "\" (tid pid comm cpu work spin sleep sleeps wakes p50 p99 rings sqes fairness)";
        return r;
    }
    o.sort = *col;
    o.view = view == "polling"    ? View::polling
             : view == "requests" ? View::requests
                                  : View::threads;
    if (o.json) o.batch = true;
    if (o.daemon_url.rfind("http://", 0) != 0 && o.daemon_url.rfind("https://", 0) != 0) {
        r.exit_code = 2;
        r.output = "iouscope top: --daemon must be an http:// or https:// URL, got \"" +
                   o.daemon_url + "\"";
        return r;
    }
    while (!o.daemon_url.empty() && o.daemon_url.back() == '/') o.daemon_url.pop_back();
    r.options = o;
    return r;
}

}  // namespace iouscope::top
