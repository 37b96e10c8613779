// make_advice: one window between two snapshots, each SQ thread's window in it, and every family
// of findings run over them (model/advisor_findings.hpp); and the daemon's rolling window.
#include "model/advisor.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "model/advisor_findings.hpp"

namespace iouscope {

using namespace advisor;

double seconds_between(const Snapshot& from, const Snapshot& to) {
    // The monotonic clock where both samples have it (a daemon before it did not send it): an
    // NTP step or a settimeofday would otherwise stretch or shrink the window, and every rate.
    if (from.monotonic_seconds > 0 && to.monotonic_seconds > 0)
        return to.monotonic_seconds - from.monotonic_seconds;
    return to.timestamp - from.timestamp;
}

Advice make_advice(const Snapshot& from, const Snapshot& to, const AdviseOptions& o) {
    Advice out;
    const double window = seconds_between(from, to);
    if (window < o.min_window_seconds) {
        out.notes.push_back(
            fmt::format("not enough data yet: {:.1f} s observed, advice needs {:.0f} s",
                        std::max(0.0, window), o.min_window_seconds));
        return out;
    }
    out.window_seconds = window;

    const FromIndex index(from);
    const std::vector<ThreadWindow> windows = thread_windows(index, to, window, out);
    for (const auto& tw : windows) {
        // A thread with no work gets the stronger advice; the idle curve would say the same.
        if (idle_ring_finding(tw, o, window, out)) continue;
        const auto after_idle = idle_finding(tw, to, o, window, out);
        price_finding(tw, to, o, window, after_idle.value_or(tw.cpu), out);
        backlog_findings(tw, index, o, window, out);
    }
    share_findings(windows, o, out);
    poll_queue_findings(from, to, out);
    request_findings(index, from, to, o, window, out);
    iowq_findings(from, to, o, out);
    if (!out.gaps_available && !windows.empty())
        out.notes.push_back(
            "no idle-time curves: they need the deep tier's work_gaps probe "
            "(iouscoped --probes.deep)");
    return out;
}

namespace {

// What a later window starts from: the sample less the rings no finding reads at a window's
// start: thread_windows matches only the SQ threads' rings there, and request_findings only
// rings busy then (an SQE in the last interval, a request in flight, a CQE that overflowed);
// a ring idle at a window's start is judged on a later window.
// Eight of these are kept a window: at 10,000 plain rings whole snapshots held 44 MB, the
// daemon's 87 MB against 43 MB with --advise.window=0. Only the head and the rings kept are
// copied: copying every ring every window/8 cost the daemon 0.3 to 0.5 % of a core more there.
std::shared_ptr<const Snapshot> window_start(const std::shared_ptr<const Snapshot>& s) {
    const auto read = [](const RingSnapshot& r) {
        return r.sq_thread > 0 || r.sqe_rate > 0 || r.requests.in_flight > 0 ||
               r.requests.overflow_cqes > 0;
    };
    if (std::all_of(s->rings.begin(), s->rings.end(), read)) return s;
    auto kept = std::make_shared<Snapshot>();
    static_cast<SnapshotHead&>(*kept) = *s;
    kept->rings.reserve(
        static_cast<std::size_t>(std::count_if(s->rings.begin(), s->rings.end(), read)));
    for (const auto& r : s->rings)
        if (read(r)) kept->rings.push_back(r);
    return kept;
}

}  // namespace

Advice AdviceWindow::update(const std::shared_ptr<const Snapshot>& now) {
    if (judged_ && seconds_between(*judged_, *now) < window_s_ / 12) return last_;
    Advice a;
    if (!history_.empty()) {
        // The newest snapshot at least a window old, else the oldest we have.
        std::shared_ptr<const Snapshot> from = history_.front();
        for (const auto& s : history_)
            if (seconds_between(*s, *now) >= window_s_) from = s;
        a = make_advice(*from, *now, opts_);
        // Drop what no future window can start from.
        while (history_.size() > 1 && seconds_between(*history_[1], *now) >= window_s_)
            history_.erase(history_.begin());
    } else {
        a.notes.push_back("not enough data yet: first sample");
    }
    if (history_.empty() || seconds_between(*history_.back(), *now) >= window_s_ / 8)
        history_.push_back(window_start(now));
    judged_ = now;
    last_ = a;
    return a;
}

}  // namespace iouscope
