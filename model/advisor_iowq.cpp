// iowq_workers_idle: a process whose io-wq workers far outnumber its requests on io-wq at both
// ends of the window, and the IORING_REGISTER_IOWQ_MAX_WORKERS limit that would hold them.
#include <fmt/format.h>

#include <algorithm>

#include "model/advisor_findings.hpp"

namespace iouscope::advisor {

const IowqSnapshot* find_process(const Snapshot& s, std::uint32_t pid) {
    for (const auto& w : s.iowq)
        if (w.pid == pid) return &w;
    return nullptr;
}

namespace {

std::uint32_t live_workers(const IowqSnapshot& w) {
    return w.workers[0] + w.workers[1];
}

// Workers far above what the requests need: at least iowq_idle_min_workers, and more than
// iowq_idle_ratio per request in flight on io-wq (one at least). False where the requests in
// flight are not known (kernels before 5.19).
bool idle_heavy(const IowqSnapshot& w, const AdviseOptions& o) {
    if (w.requests_in_flight < 0) return false;
    const double need = std::max<double>(1, static_cast<double>(w.requests_in_flight));
    return live_workers(w) >= o.iowq_idle_min_workers && live_workers(w) > o.iowq_idle_ratio * need;
}

}  // namespace

void iowq_findings(const Snapshot& from, const Snapshot& to, const AdviseOptions& o, Advice& out) {
    for (const auto& b : to.iowq) {
        const IowqSnapshot* a = find_process(from, b.pid);
        // At both ends of the window: a burst's workers, idle for their last 5 s, are not it.
        if (!a || !idle_heavy(*a, o) || !idle_heavy(b, o)) continue;
        const auto peak = std::max(a->requests_in_flight, b.requests_in_flight);
        const auto limit =
            static_cast<std::uint32_t>(std::max<std::int64_t>(o.iowq_min_limit, 2 * peak));
        // The limit holds each io-wq (one per submitting thread), so it keeps up to `limit` per
        // account in each: a process of many threads, each with a worker or two, gains nothing.
        const std::uint32_t per_account = limit * std::max<std::uint32_t>(1, b.queues);
        const std::uint32_t kept =
            std::min(b.workers[0], per_account) + std::min(b.workers[1], per_account);
        if (live_workers(b) - kept < o.iowq_idle_min_saved) continue;
        Finding f = owned_finding("iowq_workers_idle", fmt::format("process {}", b.pid), b.pid,
                                  b.comm, CgroupLabels{});
        f.summary = fmt::format(
            "{} (pid {}) holds {} io-wq workers ({} bound, {} unbound, in {} io-wqs) for {} "
            "requests in flight on io-wq, and held {} for {} a window ago: most of them wait "
            "for work",
            b.comm, b.pid, live_workers(b), b.workers[0], b.workers[1], b.queues,
            b.requests_in_flight, live_workers(*a), a->requests_in_flight);
        f.evidence = {
            {"workers", static_cast<double>(live_workers(b)), "threads"},
            {"requests_in_flight_on_iowq", static_cast<double>(b.requests_in_flight), "requests"},
            {"iowqs", static_cast<double>(b.queues), "io-wqs"},
            {"workers_at_window_start", static_cast<double>(live_workers(*a)), "threads"}};
        f.change = fmt::format(
            "cap the workers at {} per account and io-wq: io_uring_register_iowq_max_workers "
            "with {{{}, {}}} (IORING_REGISTER_IOWQ_MAX_WORKERS, on each ring whose submitting "
            "threads have the workers)",
            limit, limit, limit);
        f.predicted = {{"workers", static_cast<double>(kept), "threads"},
                       {"threads_saved", static_cast<double>(live_workers(b) - kept), "threads"}};
        f.assumption = fmt::format(
            "twice the requests in flight on io-wq at the window's ends (at least {}) is what "
            "the process needs; a burst beyond the cap waits in io-wq's queue instead of "
            "starting a worker",
            o.iowq_min_limit);
        out.findings.push_back(std::move(f));
    }
}

}  // namespace iouscope::advisor
