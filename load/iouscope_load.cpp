// iouscope-load: io_uring load generator whose printed per-ring SQE counts are the ground truth
// the daemon's metrics are tested against. See help.cpp for the user-facing contract. This file
// is the run itself: signals, the cycles, and one cycle's steps from setup to close; the
// command line is parsed by the iouscope_load library (command_line, config, ring_spec).

#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <system_error>
#include <thread>
#include <variant>
#include <vector>

#include "command_line.hpp"
#include "config.hpp"
#include "exit.hpp"
#include "report.hpp"
#include "ring_setup.hpp"
#include "ring_worker.hpp"
#include "run_control.hpp"
#include "sq_thread.hpp"

namespace {

using namespace iouscope::load;
using namespace std::chrono_literals;

// A signal during one cycle of --cycles ends the whole run after that cycle's report.
bool g_signalled = false;

// Waits up to `timeout` for SIGINT/SIGTERM; true if one arrived.
bool wait_signal(const sigset_t& set, nanoseconds timeout) {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
    for (;;) {
        const int sig = sigtimedwait(&set, nullptr, &ts);
        if (sig > 0) {
            return true;
        }
        if (errno == EINTR) {
            continue;
        }
        return false;
    }
}

// Starts one worker per ring, then waits for them all while it watches for signals and keeps
// the progress line; true if a signal stopped the run.
bool drive_rings(const LoadConfig& cfg, const Rings& rings, const Workload& workload,
                 const sigset_t& signals) {
    const std::size_t counted = static_cast<std::size_t>(std::count_if(
        cfg.rings.begin(), cfg.rings.end(), [](const RingSpec& r) { return r.count > 0; }));
    RunControl ctl(cfg.duration, cfg.pause, counted, !cfg.duration);

    std::vector<std::thread> threads;
    threads.reserve(rings.size());
    std::string spawn_error;
    for (auto& st : rings) {
        try {
            threads.emplace_back(
                [&ctl, &workload, state = st.get()] { run_ring_worker(*state, ctl, workload); });
        } catch (const std::system_error& e) {
            spawn_error =
                "cannot start thread for ring " + std::to_string(st->index) + ": " + e.what();
            ctl.request_stop();
            break;
        }
    }

    ctl.start();
    Progress progress(ctl.schedule().start());
    bool signalled = false;
    while (ctl.rings_done() < threads.size()) {
        if (wait_signal(signals, 20ms)) {
            if (signalled) {
                progress.clear();
                std::fprintf(stderr,
                             "%s: second signal, exiting without waiting for in-flight "
                             "completions\n",
                             kProg);
                std::_Exit(kExitFailure);
            }
            signalled = true;
            g_signalled = true;
            ctl.request_stop();
        }
        progress.tick(rings);
    }
    for (auto& t : threads) {
        t.join();
    }
    progress.clear();

    if (!spawn_error.empty()) {
        die(spawn_error);
    }
    return signalled;
}

// --hold: the rings stay open for the hold's duration, or until a signal.
void hold_rings(const HoldSpec& hold, const sigset_t& signals) {
    if (!hold.forever && hold.duration <= nanoseconds{0}) {
        return;
    }
    const auto until = Clock::now() + hold.duration;
    for (;;) {
        const auto now = Clock::now();
        if (!hold.forever && now >= until) {
            break;
        }
        const nanoseconds slice =
            hold.forever ? nanoseconds{1s} : std::min<nanoseconds>(1s, until - now);
        if (wait_signal(signals, slice)) {
            break;
        }
    }
}

void close_rings(Rings& rings, const Workload& workload) {
    for (auto it = rings.rbegin(); it != rings.rend(); ++it) {
        if ((*it)->open) {
            io_uring_queue_exit(&(*it)->ring);
        }
    }
    for (const int fd : {workload.fd, workload.scratch_fd, workload.direct_fd}) {
        if (fd >= 0) {
            close(fd);
        }
    }
}

// One cycle: set up, report the setup, submit and reap, report, hold, close.
int run(const LoadConfig& cfg, const sigset_t& signals) {
    if (const auto err = check_cpus(cfg, sysconf(_SC_NPROCESSORS_CONF))) {
        die_usage(*err);
    }
    const Workload workload = open_workload(cfg);
    ensure_fd_limit(cfg.rings.size());

    Rings rings = create_rings(cfg);
    for (auto& st : rings) {
        st->sq_thread = sq_thread_tid(*st);
    }
    report_setup(rings, cfg.json);

    const bool signalled = drive_rings(cfg, rings, workload, signals);

    report_final(rings, cfg.json);
    const int status = report_failures(rings);
    if (!signalled) {
        hold_rings(cfg.hold, signals);
    }
    close_rings(rings, workload);
    return status;
}

// The command line into a configuration, or the help page or a usage error and the exit.
LoadConfig configure(int argc, char** argv) {
    const CommandLine line = parse_command_line(argc, argv);
    if (std::holds_alternative<HelpRequest>(line)) {
        std::fputs(help_text(), stdout);
        std::exit(kExitOk);
    }
    if (const auto* err = std::get_if<ParseError>(&line)) {
        die_usage(err->message);
    }
    auto cfg = build_config(std::get<RawOptions>(line));
    if (const auto* err = std::get_if<ParseError>(&cfg)) {
        die_usage(err->message);
    }
    return std::get<LoadConfig>(std::move(cfg));
}

}  // namespace

int main(int argc, char** argv) {
    // Blocked before any thread exists so every thread inherits the mask and the main thread is
    // the only one that ever sees SIGINT/SIGTERM (via sigtimedwait); workers blocked in
    // io_uring_enter are then never interrupted.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    const LoadConfig config = configure(argc, argv);
    int status = kExitOk;
    for (std::uint64_t k = 0; k < config.cycles; ++k) {
        if (config.cycles > 1) {
            emit(config.json ? "{\"cycle\":" + std::to_string(k) + "}"
                             : "cycle " + std::to_string(k));
        }
        if (run(config, signals) != kExitOk) {
            status = kExitFailure;
        }
        if (g_signalled || (k + 1 < config.cycles && wait_signal(signals, config.gap))) {
            break;
        }
    }
    return status;
}
