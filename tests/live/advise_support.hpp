#pragma once
// Helpers of the advise live tests (advise_test.cpp, advise_sampled_test.cpp).
#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/live/harness.hpp"

namespace live::advise {

using nlohmann::json;
using std::chrono::seconds;

// --- What the kernel says threads did ----------------------------------------------------------

std::optional<unsigned long long> voluntary_switches(pid_t pid, pid_t tid);

// Whether the running kernel's BTF has the typedef `name` (a tracepoint's btf_trace_* type).
bool kernel_btf_has_typedef(const char* name);

// What the kernel says a set of threads did over a window.
struct Measured {
    double cpu = 0;     // cores
    double sleeps = 0;  // per second: each sleep of an SQ thread ends in a wake by new work
};

// Each group (a process and some of its threads) measured over one `window` they share.
std::vector<Measured> measure_each(const std::vector<std::pair<pid_t, std::set<int>>>& groups,
                                   seconds window);
Measured measure(pid_t pid, const std::set<int>& tids, seconds window);

// The threads of a process. A thread that starts or ends inside a window is not in it: the loads
// here start all theirs before they report "started".
std::set<int> tasks(pid_t pid);

// CPU of every thread of each process (submitters and SQ threads alike), in cores over one
// `window` they share.
std::vector<double> processes_cpu(const std::vector<pid_t>& pids, seconds window);
double process_cpu(pid_t pid, seconds window);

// --- Loads and the advisor's changes applied to them ---------------------------------------------

// The load's `--ring` arguments of a test, each rewritten as the advice says.
std::vector<std::string> without_sqpoll(const std::vector<std::string>& args);
std::vector<std::string> shared(const std::vector<std::string>& args);
std::vector<std::string> with_idle(const std::vector<std::string>& args, long ms);

// iouscope-load started with `args`; `rings` gets its rings once it has set them all up.
std::unique_ptr<Child> start_load(std::vector<std::string> args, std::vector<LoadRing>& rings);
std::set<int> sq_threads(const std::vector<LoadRing>& rings);

// A load that submits in bursts: 5 ms of work, then 45 ms of pause.
inline const std::vector<std::string> kBursty = {"--duration", "120s",        "--pause-every",
                                                 "5ms",        "--pause-for", "45ms"};

// --- The advisor's answers -----------------------------------------------------------------------

// `iouscope advise --json` against the daemon; returns the parsed advice and exit status.
std::pair<json, int> advise_cli(Daemon& d, std::vector<std::string> extra = {});
const json* finding(const json& advice, const std::string& id);
double figure(const json& f, const char* group, const std::string& name);
// Waits until the daemon's advisor reports `id` (after at least one full window).
json wait_for_finding(Daemon& d, const std::string& id, seconds timeout,
                      std::vector<std::string> extra = {});

// |predicted - measured| within 25 % of measured, the bar the advisor is held to.
void expect_within_25pct(double predicted, double measured, const char* what);

// Each change the advice recommends applied to the load and measured; one table row per change.
std::string apply_advice(const std::vector<std::string>& args, const json& advice, double before);

// Runs one case of a test that runs its cases side by side. In a thread of its own an exception
// would end the whole binary: it fails the test instead.
template <class F>
void run_guarded(const char* label, F&& run) {
    try {
        run();
    } catch (const std::exception& e) {
        ADD_FAILURE() << label << ": " << e.what();
    }
}

// --- Gaps and idle curves ------------------------------------------------------------------------

// What the gap tests read of one daemon's snapshot: its duty cycle, and one thread's gaps.
struct GapReading {
    json sampling;           // gap_sampling, null where every gap is recorded
    std::uint64_t gaps = 0;  // the thread's gaps, summed over buckets
    double gap_ns = 0;       // their lengths, summed
    double at = 0;           // the sample's CLOCK_MONOTONIC seconds
    bool found = false;      // the thread is in the snapshot
};
std::optional<GapReading> read_gaps(Daemon& d, int tid);

// The idle curve and findings of one daemon's advice about one process.
struct Judged {
    std::set<std::string> ids;
    long recommended_us = -1;                    // sq_idle_too_long's setting, -1 if none
    std::map<long, double> cpu_by_setting_us;    // the curve of the finding or alternative
    std::map<std::string, std::string> changes;  // each alternative's change, "" if unavailable
    std::string notes;
};
Judged judge(const json& advice);

// Whether the advice was judged over a full window with an idle curve ready.
bool settled(const json& advice, int rc);

}  // namespace live::advise
