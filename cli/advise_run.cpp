// `iouscope advise`: gets a window of snapshots (the daemon's, or its own) and prints advice.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/advise.hpp"
#include "cli/top_source.hpp"
#include "collect/submit_cost.hpp"
#include "exporters/json_exporter.hpp"
#include "model/advisor.hpp"

namespace iouscope::advise {

namespace {

int print(const Options& o, const Snapshot& snap, Advice advice) {
    if (advice.window_seconds <= 0) {
        std::cerr << "iouscope advise: "
                  << (advice.notes.empty() ? std::string("not enough data yet")
                                           : advice.notes.front())
                  << "\n";
        return 3;
    }
    if (auto err = filter_findings(snap, o, advice)) {
        std::cerr << "iouscope advise: " << *err << "\n";
        return 4;
    }
    if (o.json)
        std::cout << advice_to_json(advice) << "\n";
    else
        std::cout << render_text(advice, snap);
    return 0;
}

int run_local(const Options& o) {
    std::string err;
    // Warnings from the tier fallback (fentry refused, ...) are the daemon's business; here they
    // would only bury the advice.
    spdlog::set_level(spdlog::level::err);
    AdviseOptions ao;
    ao.wake_weight = o.wake_weight;
    measure_submit_cost(ao);  // before the probes attach: its ring is not one to judge
    auto src = top::start_local(1.0, err, true);
    if (!src) {
        std::cerr << "iouscope advise: cannot sample in-process: " << err << "\n";
        return 1;
    }
    // The window starts at the second sample: the per-SQE probes attach just before the first,
    // so a thread's gap record may not exist yet when it is taken.
    std::shared_ptr<const Snapshot> first;
    for (int i = 0; i < 100; ++i) {
        first = src->latest();
        if (first && first->seq >= 2) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!first) {
        std::cerr << "iouscope advise: the first sample did not arrive: " << src->last_error()
                  << "\n";
        return 1;
    }
    const bool tty = isatty(STDERR_FILENO);
    const auto start = std::chrono::steady_clock::now();
    const auto end = start + std::chrono::duration<double>(o.duration_seconds);
    while (std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        if (tty) {
            const double left =
                std::chrono::duration<double>(end - std::chrono::steady_clock::now()).count();
            std::fprintf(stderr, "\riouscope advise: watching, %.0f s left\x1b[K",
                         std::max(0.0, left));
        }
    }
    if (tty) std::fprintf(stderr, "\r\x1b[K");
    // One more tick so the last snapshot is at least `duration` after the first.
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    auto last = src->latest();
    return print(o, *last, make_advice(*first, *last, ao));
}

}  // namespace

int run(const Options& o) {
    if (!o.local) {
        std::string daemon_err;
        if (auto src = top::connect_daemon(o.daemon_url, 3600, daemon_err)) {
            auto snap = src->latest();
            return print(o, *snap, snap->advice);
        }
        if (geteuid() != 0) {
            std::cerr << "iouscope advise: no daemon at " << o.daemon_url << " (" << daemon_err
                      << "), and sampling in-process needs root\n";
            return 1;
        }
        std::cerr << "iouscope advise: no daemon at " << o.daemon_url
                  << "; watching in-process for " << o.duration_seconds << " s\n";
    }
    return run_local(o);
}

}  // namespace iouscope::advise
