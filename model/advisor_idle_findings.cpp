// The SQ thread idle and spin findings: sq_idle_too_long, a shorter sq_thread_idle read off the
// thread's idle curve, and sq_spinning_without_work, a thread that spins for next to no SQEs.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "model/advisor_findings.hpp"

namespace iouscope::advisor {

// --- sq_idle_too_long ---------------------------------------------------------------------

namespace {

// Whether both ends of the window have what the idle curve needs; a note says why not.
bool idle_curve_ready(const ThreadSnapshot& a, const ThreadSnapshot& b, const Snapshot& to,
                      Advice& out) {
    if (!b.has_gaps) return false;
    if (!a.has_gaps) {
        out.notes.push_back(
            fmt::format("sq_thread {}: its SQE gaps are tracked only since inside "
                        "the window; the idle curve waits for a full one",
                        b.tid));
        return false;
    }
    if (const double recorded = recorded_between(a, b); recorded < kMinRecordedSeconds) {
        out.notes.push_back(fmt::format(
            "sq_thread {}: its SQE gaps are sampled (iouscoped --probes.gap-sampling) and "
            "{:.1f} s of the window were recorded; the idle curve waits for {:.0f} s",
            b.tid, recorded, kMinRecordedSeconds));
        return false;
    }
    if (!b.idle_ns_granular && to.hz == 0) {
        out.notes.push_back(
            fmt::format("sq_thread {}: HZ is not known yet, so the idle curve "
                        "waits for the next sample",
                        b.tid));
        return false;
    }
    return true;
}

// The setting that minimises CPU plus weighted wake delay; marks it recommended.
IdleCurvePoint& recommend(std::vector<IdleCurvePoint>& curve, const AdviseOptions& o,
                          double wake_s) {
    auto cost = [&](const IdleCurvePoint& p) { return curve_cost(p, o, wake_s); };
    std::size_t best = 0;
    for (std::size_t i = 1; i < curve.size(); ++i)
        if (cost(curve[i]) < cost(curve[best]) - 1e-12) best = i;
    curve[best].recommended = true;
    return curve[best];
}

std::string idle_assumption(const ThreadSnapshot& b, const Snapshot& to, const AdviseOptions& o,
                            double window, double wake_s, bool measured_wake) {
    return fmt::format(
        "the gaps between SQEs stay as measured over {:.0f} s; the thread spins a gap out until "
        "the idle time passes, then sleeps and is woken by the next SQE at a cost of {} each "
        "({}); {}; one second of wake delay is weighed as {:g} CPU-seconds",
        window, fmt_seconds(wake_s), measured_wake ? "measured median" : "assumed, no wake seen",
        ns_settable(b, to)
            ? "this kernel takes sq_thread_idle in nanoseconds (IORING_SETUP_IDLE_NS), so "
              "sub-millisecond values are exact"
            : fmt::format("this kernel rounds sq_thread_idle up to jiffies (HZ={}, {} each) and "
                          "spins up to one more tick, so values below a tick are not available",
                          to.hz, fmt_seconds(1.0 / to.hz)),
        o.wake_weight);
}

// What the thread does now: the finding's evidence.
std::vector<Figure> idle_evidence(const ThreadWindow& tw, const IdleCurvePoint* cur,
                                  double wake_s) {
    const ThreadSnapshot& a = *tw.a;
    const ThreadSnapshot& b = *tw.b;
    std::vector<Figure> ev = {{"cpu_cores", tw.cpu, "cores"},
                              {"work_cores", tw.work, "cores"},
                              {"spin_cores", tw.spin, "cores"},
                              {"sqes_per_second", tw.sqes, "1/s"},
                              {"wakeups_per_second", tw.wakeups, "1/s"},
                              {"sq_thread_idle_seconds", b.idle_setting_seconds, "s"},
                              {"wake_latency_seconds", wake_s, "s"}};
    if (cur) ev.push_back({"model_cpu_cores_at_current_setting", cur->cpu_cores, "cores"});
    const double sleeps = delta(a.gaps.sleep_spins, b.gaps.sleep_spins);
    if (sleeps > 0)
        ev.push_back({"spin_before_sleep_seconds",
                      delta(a.gaps.sleep_spin_seconds, b.gaps.sleep_spin_seconds) / sleeps, "s"});
    return ev;
}

}  // namespace

std::optional<double> idle_finding(const ThreadWindow& tw, const Snapshot& to,
                                   const AdviseOptions& o, double window, Advice& out) {
    const ThreadSnapshot& b = *tw.b;
    if (!idle_curve_ready(*tw.a, b, to, out)) return std::nullopt;
    const bool ns = ns_settable(b, to);
    auto curve = thread_curve(tw, to, window, ns);
    if (curve.empty()) return std::nullopt;
    bool measured_wake = false;
    const double wake_s = wake_latency(*tw.a, b, o, measured_wake);
    const IdleCurvePoint* cur = nullptr;
    for (auto& p : curve)
        if (p.current) cur = &p;
    const IdleCurvePoint& rec = recommend(curve, o, wake_s);
    const double rec_cpu = rec.cpu_cores;
    const double saving = tw.cpu - rec.cpu_cores;
    if (rec.current || rec.setting_seconds >= b.idle_setting_seconds ||
        saving < o.min_cpu_saving_cores)
        return std::nullopt;

    Finding f = thread_finding("sq_idle_too_long", b);
    f.ring = tw.rings.empty() ? "" : tw.rings.front()->id;
    f.summary = fmt::format(
        "sq_thread_idle {} keeps the SQ thread spinning through gaps in its work: {:.0f}% of a "
        "CPU for {:.0f} SQEs/s; {} would use {:.0f}%",
        fmt_setting(b.idle_setting_seconds, b.idle_ns_granular), tw.cpu * 100, tw.sqes,
        fmt_setting(rec.setting_seconds, ns), rec.cpu_cores * 100);
    f.evidence = idle_evidence(tw, cur, wake_s);
    f.change =
        fmt::format("set io_uring_params.{} for ring{} {}", idle_change(rec.setting_seconds, b, ns),
                    tw.rings.size() > 1 ? "s" : "", ring_list(tw.rings));
    f.predicted = {{"cpu_cores", rec.cpu_cores, "cores"},
                   {"cpu_cores_saved", saving, "cores"},
                   {"wakeups_per_second", rec.wakeups_per_second, "1/s"},
                   {"added_wake_delay_per_second",
                    std::max(0.0, rec.wakeups_per_second - tw.wakeups) * wake_s, "s/s"}};
    f.assumption = idle_assumption(b, to, o, window, wake_s, measured_wake);
    f.curve = std::move(curve);
    out.findings.push_back(std::move(f));
    return rec_cpu;
}

// --- sq_spinning_without_work ---------------------------------------------------------------

bool idle_ring_finding(const ThreadWindow& tw, const AdviseOptions& o, double window, Advice& out) {
    if (tw.cpu < o.spinning_min_cpu_cores || tw.sqes >= o.idle_ring_max_sqe_rate) return false;
    const ThreadSnapshot& b = *tw.b;
    Finding f = thread_finding("sq_spinning_without_work", b);
    f.ring = tw.rings.empty() ? "" : tw.rings.front()->id;
    f.summary = fmt::format("SQ thread spins at {:.0f}% of a CPU for {:.2g} SQEs/s over {:.0f} s",
                            tw.cpu * 100, tw.sqes, window);
    f.evidence = {{"cpu_cores", tw.cpu, "cores"},
                  {"spin_cores", tw.spin, "cores"},
                  {"sqes_per_second", tw.sqes, "1/s"},
                  {"sq_thread_idle_seconds", b.idle_setting_seconds, "s"}};
    f.change = fmt::format(
        "create ring{} {} without IORING_SETUP_SQPOLL and submit with io_uring_enter; or, to "
        "keep SQPOLL, make sq_thread_idle shorter than the {} between its submissions",
        tw.rings.size() > 1 ? "s" : "", ring_list(tw.rings),
        tw.sqes > 0 ? fmt_seconds(1.0 / tw.sqes) : std::string("time"));
    const double after = tw.sqes * o.submit_syscall_seconds;
    f.predicted = {{"cpu_cores", after, "cores"},
                   {"cpu_cores_saved", tw.cpu - after, "cores"},
                   {"wakeups_per_second", 0, "1/s"}};
    f.assumption = fmt::format(
        "without an SQ thread each submission costs the application one io_uring_enter "
        "({} each, {}; {:.2g} per second)",
        fmt_seconds(o.submit_syscall_seconds), o.submit_cost_source, tw.sqes);
    out.findings.push_back(std::move(f));
    return true;
}

}  // namespace iouscope::advisor
