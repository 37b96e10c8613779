// The pieces every family of findings uses (model/advisor_window.hpp): one SQ thread's window,
// the wording of figures and findings, and one thread's idle curve from the idle model.
#include "model/advisor_window.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "model/counters.hpp"

namespace iouscope::advisor {

std::string fmt_seconds(double s) {
    if (s >= 1) return fmt::format("{:.3g} s", s);
    if (s >= 1e-3) return fmt::format("{:.3g} ms", s * 1e3);
    return fmt::format("{:.3g} us", s * 1e6);
}

std::string fmt_setting(double s, bool ns_granular) {
    if (ns_granular) return fmt::format("{} ns ({})", std::llround(s * 1e9), fmt_seconds(s));
    return fmt::format("{} ms", std::llround(s * 1e3));
}

double delta(double a, double b) {
    return std::max(0.0, b - a);
}
double delta(std::uint64_t a, std::uint64_t b) {
    return b > a ? static_cast<double>(b - a) : 0;
}

double wake_latency(const ThreadSnapshot& a, const ThreadSnapshot& b, const AdviseOptions& o,
                    bool& measured) {
    measured = false;
    if (b.wake_latency_log2.empty()) return o.assumed_wake_latency_seconds;
    std::vector<std::uint64_t> d(b.wake_latency_log2);
    if (a.wake_latency_log2.size() == d.size())
        for (std::size_t i = 0; i < d.size(); ++i) d[i] -= std::min(d[i], a.wake_latency_log2[i]);
    if (auto p50 = log2_quantile(d, 0.5)) {
        measured = true;
        return *p50 / 1e9;
    }
    return o.assumed_wake_latency_seconds;
}

std::vector<ThreadWindow> thread_windows(const FromIndex& index, const Snapshot& to, double window,
                                         Advice& out) {
    std::map<std::int32_t, std::vector<const RingSnapshot*>> rings_of;
    for (const auto& r : to.rings)
        if (r.sq_thread > 0) rings_of[r.sq_thread].push_back(&r);
    std::vector<ThreadWindow> windows;
    for (const auto& b : to.threads) {
        const ThreadSnapshot* a = index.thread(b.tid);
        if (!a) {
            out.notes.push_back(fmt::format(
                "sq_thread {}: started inside the window; judged once it has a full one", b.tid));
            continue;
        }
        ThreadWindow tw{a, &b, 0, 0, 0, 0, 0, 0, {}};
        tw.cpu = delta(a->cpu_seconds, b.cpu_seconds) / window;
        tw.work = delta(a->work_seconds, b.work_seconds) / window;
        tw.spin = std::max(0.0, tw.cpu - tw.work);
        tw.wakeups = delta(a->wakeups, b.wakeups) / window;
        tw.sleeps = delta(a->sleeps, b.sleeps) / window;
        for (const RingSnapshot* r : rings_of[b.tid]) {
            tw.rings.push_back(r);
            if (const auto* old = index.ring(*r))
                tw.sqes += delta(old->sqes_total, r->sqes_total) / window;
        }
        out.gaps_available = out.gaps_available || b.has_gaps;
        windows.push_back(tw);
    }
    return windows;
}

Finding thread_finding(const char* id, const ThreadSnapshot& t) {
    Finding f;
    f.id = id;
    f.subject = fmt::format("sq_thread {}", t.tid);
    f.sq_thread = t.tid;
    f.pid = t.pid;
    f.comm = t.comm;
    f.container_id = t.cgroup.container_id;
    f.pod_uid = t.cgroup.pod_uid;
    return f;
}

std::string ring_list(const std::vector<const RingSnapshot*>& rings) {
    std::string out;
    for (const auto* r : rings) out += (out.empty() ? "" : ", ") + r->id;
    return out;
}

double recorded_between(const ThreadSnapshot& a, const ThreadSnapshot& b) {
    if (b.gaps.recorded_seconds < 0) return std::numeric_limits<double>::infinity();
    return std::max(0.0, b.gaps.recorded_seconds - a.gaps.recorded_seconds);
}

double curve_cost(const IdleCurvePoint& p, const AdviseOptions& o, double wake_s) {
    return p.cpu_cores + o.wake_weight * p.wakeups_per_second * wake_s;
}

std::vector<IdleCurvePoint> thread_curve(const ThreadWindow& tw, const Snapshot& to, double window,
                                         bool candidates_ns) {
    return idle_curve(thread_gap_window(*tw.a, *tw.b, window), tw.b->idle_setting_seconds,
                      tw.b->idle_ns_granular, candidates_ns, to.hz);
}

bool ns_settable(const ThreadSnapshot& b, const Snapshot& to) {
    return b.idle_ns_granular || to.idle_ns_supported;
}

std::string idle_change(double seconds, const ThreadSnapshot& b, bool ns) {
    if (!ns) return fmt::format("sq_thread_idle = {} (ms)", std::llround(seconds * 1e3));
    if (b.idle_ns_granular)
        return fmt::format("sq_thread_idle = {} (ns, IORING_SETUP_IDLE_NS)",
                           std::llround(seconds * 1e9));
    return fmt::format("sq_thread_idle = {} (ns) with IORING_SETUP_IDLE_NS in flags",
                       std::llround(seconds * 1e9));
}

}  // namespace iouscope::advisor
