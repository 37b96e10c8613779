#include "model/advisor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>

#include "iouscope/records.h"
#include "model/counters.hpp"

namespace iouscope {

namespace {

// IORING_SQPOLL_CAP_ENTRIES_VALUE: with more than one ring on a thread, each pass takes at most
// this many SQEs from each ring.
constexpr double kSharedPassCap = 8;

std::string fmt_seconds(double s) {
    if (s >= 1) return fmt::format("{:.3g} s", s);
    if (s >= 1e-3) return fmt::format("{:.3g} ms", s * 1e3);
    return fmt::format("{:.3g} us", s * 1e6);
}

std::string fmt_setting(double s, bool ns_granular) {
    if (ns_granular) return fmt::format("{} ns ({})", std::llround(s * 1e9), fmt_seconds(s));
    return fmt::format("{} ms", std::llround(s * 1e3));
}

// The `from` snapshot indexed once, so judging thousands of rings stays linear.
struct FromIndex {
    std::map<std::int32_t, const ThreadSnapshot*> threads;
    std::map<std::uint64_t, const RingSnapshot*> rings;  // by ctx

    explicit FromIndex(const Snapshot& s) {
        for (const auto& t : s.threads) threads.emplace(t.tid, &t);
        for (const auto& r : s.rings) rings.emplace(r.ctx, &r);
    }
    const ThreadSnapshot* thread(std::int32_t tid) const {
        auto it = threads.find(tid);
        return it == threads.end() ? nullptr : it->second;
    }
    // A ctx address can be reused by a new ring; the id tells them apart.
    const RingSnapshot* ring(const RingSnapshot& now) const {
        auto it = rings.find(now.ctx);
        return it != rings.end() && it->second->id == now.id ? it->second : nullptr;
    }
};

const DeviceSnapshot* find_device(const Snapshot& s, const std::string& name) {
    for (const auto& d : s.devices)
        if (d.name == name) return &d;
    return nullptr;
}

double delta(double a, double b) {
    return std::max(0.0, b - a);
}
double delta(std::uint64_t a, std::uint64_t b) {
    return b > a ? static_cast<double>(b - a) : 0;
}

// Wake latency over the window: the median of the difference of the log2 histograms.
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

// What the window says about one SQ thread.
struct ThreadWindow {
    const ThreadSnapshot* a;
    const ThreadSnapshot* b;
    double cpu = 0, work = 0, spin = 0, wakeups = 0, sleeps = 0;  // per second
    double sqes = 0;                                              // per second, its rings
    std::vector<const RingSnapshot*> rings;                       // in `to`
};

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

// --- sq_idle_too_long ---------------------------------------------------------------------

// The least recorded time a sampled window's idle curve is drawn from: one on-window's worth at
// the shortest --probes.gap-sampling (3s, less the 2s cutoff).
constexpr double kMinRecordedSeconds = 1;

// Recorded time of a sampled probe between two snapshots; infinite where every gap is recorded.
double recorded_between(const ThreadSnapshot& a, const ThreadSnapshot& b) {
    if (b.gaps.recorded_seconds < 0) return std::numeric_limits<double>::infinity();
    return std::max(0.0, b.gaps.recorded_seconds - a.gaps.recorded_seconds);
}

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

// What a setting costs: CPU plus its wakes' delay, weighed by wake_weight.
double curve_cost(const IdleCurvePoint& p, const AdviseOptions& o, double wake_s) {
    return p.cpu_cores + o.wake_weight * p.wakeups_per_second * wake_s;
}

// The thread's idle curve over the window: its current setting in its own unit, the others in
// nanoseconds or at the kernel's jiffies.
std::vector<IdleCurvePoint> thread_curve(const ThreadWindow& tw, const Snapshot& to, double window,
                                         bool candidates_ns) {
    return idle_curve(thread_gap_window(*tw.a, *tw.b, window), tw.b->idle_setting_seconds,
                      tw.b->idle_ns_granular, candidates_ns, to.hz);
}

// Whether the thread can be given a setting in nanoseconds: the kernel has IORING_SETUP_IDLE_NS
// (seeds patch 002), known from its BTF whether or not a ring uses it yet.
bool ns_settable(const ThreadSnapshot& b, const Snapshot& to) {
    return b.idle_ns_granular || to.idle_ns_supported;
}

// How to ask for a setting in that unit; a ring without IORING_SETUP_IDLE_NS needs the flag.
std::string idle_change(double seconds, const ThreadSnapshot& b, bool ns) {
    if (!ns) return fmt::format("sq_thread_idle = {} (ms)", std::llround(seconds * 1e3));
    if (b.idle_ns_granular)
        return fmt::format("sq_thread_idle = {} (ns, IORING_SETUP_IDLE_NS)",
                           std::llround(seconds * 1e9));
    return fmt::format("sq_thread_idle = {} (ns) with IORING_SETUP_IDLE_NS in flags",
                       std::llround(seconds * 1e9));
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

// --- sq_thread_overpriced -------------------------------------------------------------------
//
// The thread's price against what the same SQEs would cost done otherwise, from measured
// figures, whatever the SQE rate: the fixed thresholds above miss a thread at 100 % for a modest
// rate whose gaps no sq_thread_idle can span.

struct PriceContext {
    const ThreadWindow& tw;
    const Snapshot& to;
    const AdviseOptions& o;
    double window;
    double wake_s;
    bool measured_wake;
};

// Mean spin after the last SQE at the shortest setting: upstream rounds sq_thread_idle up to
// whole jiffies (1 ms is one tick) and spins up to a tick more. 0 with nanosecond idle.
double shortest_mean_spin(const ThreadSnapshot& b, const Snapshot& to) {
    if (ns_settable(b, to) || to.hz == 0) return 0;
    const unsigned hz = to.hz;
    return 1.5 / hz;
}

// Share of submissions that find the thread asleep, each waiting for its wakeup.
double wake_delay(double sqes, double wakeups_per_second, double wake_s) {
    if (sqes <= 0) return 0;
    return std::min(1.0, wakeups_per_second / sqes) * wake_s;
}

double wake_delay(const PriceContext& c, double wakeups_per_second) {
    return wake_delay(c.tw.sqes, wakeups_per_second, c.wake_s);
}

// The same SQEs without SQPOLL: the work moves to the submitter, which pays one system call per
// submission. The caller says what to change.
Alternative no_sqpoll_price(double work, double sqes, const AdviseOptions& o) {
    Alternative a;
    a.name = "no_sqpoll";
    a.cpu_cores = work + sqes * o.submit_syscall_seconds;
    a.added_latency_seconds = o.submit_syscall_seconds;
    a.note = fmt::format("one io_uring_enter per SQE at {} ({})",
                         fmt_seconds(o.submit_syscall_seconds), o.submit_cost_source);
    return a;
}

std::string no_setting_helps(const PriceContext& c, double floor) {
    return fmt::format(
        "no setting helps: the gaps between SQEs (mean {}) are shorter than the shortest spin "
        "this kernel allows (sq_thread_idle of 1 ms is one tick at HZ={}, and the thread spins "
        "{} to {} after its last SQE), so no sq_thread_idle lets it sleep between them",
        fmt_seconds(1 / c.tw.sqes), c.to.hz, fmt_seconds(floor / 1.5), fmt_seconds(floor / 0.75));
}

Alternative price_now(const PriceContext& c) {
    Alternative a;
    a.name = "now";
    a.cpu_cores = c.tw.cpu;
    a.wakeups_per_second = c.tw.wakeups;
    a.added_latency_seconds = wake_delay(c, c.tw.wakeups);
    a.note = c.tw.sqes > 0
                 ? fmt::format("{} of SQ thread CPU per SQE", fmt_seconds(c.tw.cpu / c.tw.sqes))
                 : std::string("no SQEs in the window");
    return a;
}

Alternative price_no_sqpoll(const PriceContext& c) {
    Alternative a = no_sqpoll_price(c.tw.work, c.tw.sqes, c.o);
    a.change =
        fmt::format("create ring{} {} without IORING_SETUP_SQPOLL and submit with io_uring_enter",
                    c.tw.rings.size() > 1 ? "s" : "", ring_list(c.tw.rings));
    return a;
}

// The cheapest other setting of a curve, by CPU plus weighted wake delay.
const IdleCurvePoint* cheapest_point(const PriceContext& c,
                                     const std::vector<IdleCurvePoint>& curve) {
    const IdleCurvePoint* best = nullptr;
    auto score = [&](const IdleCurvePoint& p) { return curve_cost(p, c.o, c.wake_s); };
    for (const auto& p : curve)
        if (!p.current && (!best || score(p) < score(*best))) best = &p;
    return best;
}

std::vector<IdleCurvePoint> curve_of(const PriceContext& c, bool ns_granular) {
    if (!c.tw.a->has_gaps || !c.tw.b->has_gaps) return {};
    if (recorded_between(*c.tw.a, *c.tw.b) < kMinRecordedSeconds) return {};
    return thread_curve(c.tw, c.to, c.window, ns_granular);
}

Alternative price_idle(const PriceContext& c) {
    const ThreadSnapshot& b = *c.tw.b;
    Alternative a;
    a.name = "sq_thread_idle";
    a.available = false;
    const double floor = shortest_mean_spin(b, c.to);
    const bool gaps_too_short = c.tw.sqes > 0 && 1 / c.tw.sqes < floor;
    const bool ns = ns_settable(b, c.to);
    const auto curve = curve_of(c, ns);
    const IdleCurvePoint* best = cheapest_point(c, curve);
    if (best && best->cpu_cores < 0.9 * c.tw.cpu) {
        a.available = true;
        a.change = "set io_uring_params." + idle_change(best->setting_seconds, b, ns);
        a.cpu_cores = best->cpu_cores;
        a.wakeups_per_second = best->wakeups_per_second;
        a.added_latency_seconds = wake_delay(c, best->wakeups_per_second);
        a.note = "from the gaps between SQEs measured over the window";
    } else if (gaps_too_short || !curve.empty()) {
        a.note = gaps_too_short
                     ? no_setting_helps(c, floor)
                     : "no sq_thread_idle saves a tenth of the thread's CPU on these gaps";
    } else {
        a.note = "pricing other idle times needs the gaps between SQEs: iouscoped --probes.deep";
    }
    return a;
}

// Gathering submissions so that the gaps outgrow the shortest spin; never held longer than
// batch_max_delay_seconds.
Alternative price_batch(const PriceContext& c) {
    const ThreadSnapshot& b = *c.tw.b;
    Alternative a;
    a.name = "batch_submissions";
    const double floor = shortest_mean_spin(b, c.to);
    const double period = c.o.batch_max_delay_seconds;
    const double per_batch = std::round(period * c.tw.sqes);
    // The gap between batches must outlast the longest spin, two ticks.
    const double longest_spin = floor * 4 / 3;
    a.available = floor > 0 && period > longest_spin && per_batch >= 2;
    if (!a.available) {
        a.note = floor == 0      ? "this kernel's nanosecond idle makes batching unneeded"
                 : per_batch < 2 ? "submissions are already further apart than a batch would hold"
                                 : fmt::format("a batch held at most {} cannot outlast the {} spin",
                                               fmt_seconds(period), fmt_seconds(longest_spin));
        return a;
    }
    const double batches = c.tw.sqes / per_batch;
    a.change = fmt::format(
        "submit {:.0f} SQEs at a time (one tail update every {}), with sq_thread_idle = 1 ms",
        per_batch, fmt_seconds(period));
    a.cpu_cores = c.tw.work + batches * floor;
    a.wakeups_per_second = batches;
    a.added_latency_seconds = period / 2 + c.wake_s;
    a.note = "submissions evenly spaced; each batch is spun out for the shortest idle, then slept";
    return a;
}

Alternative price_ns_kernel(const PriceContext& c) {
    Alternative a;
    a.name = "idle_ns_kernel";
    a.available = false;
    if (ns_settable(*c.tw.b, c.to)) {
        a.note = "this kernel already takes sq_thread_idle in nanoseconds (IORING_SETUP_IDLE_NS)";
        return a;
    }
    // The least CPU it could do: its wakeups are priced when the alternatives are weighed.
    const auto curve = curve_of(c, true);
    const IdleCurvePoint* best = nullptr;
    for (const auto& p : curve)
        if (!best || p.cpu_cores < best->cpu_cores) best = &p;
    if (!best) {
        a.note = "pricing it needs the gaps between SQEs: iouscoped --probes.deep";
        return a;
    }
    a.available = true;
    a.change =
        fmt::format("a kernel with nanosecond sq_thread_idle (IORING_SETUP_IDLE_NS), set to {} ns",
                    std::llround(best->setting_seconds * 1e9));
    a.cpu_cores = best->cpu_cores;
    a.wakeups_per_second = best->wakeups_per_second;
    a.added_latency_seconds = wake_delay(c, best->wakeups_per_second);
    a.note = "from the gaps between SQEs measured over the window";
    return a;
}

// CPU plus the delay it adds per second, weighed by wake_weight.
double alternative_score(const Alternative& a, double sqes, const AdviseOptions& o) {
    return a.cpu_cores + o.wake_weight * a.added_latency_seconds * sqes;
}

}  // namespace

AlternativeChoice choose_alternative(std::vector<Alternative>& alts, double cpu_now, double sqes,
                                     const AdviseOptions& o) {
    auto score = [&](const Alternative& a) { return alternative_score(a, sqes, o); };
    Alternative *other = nullptr, *idle = nullptr;
    for (auto& a : alts) {
        if (a.name == "now" || !a.available || a.cpu_cores >= cpu_now) continue;
        Alternative*& slot = a.name == "sq_thread_idle" ? idle : other;
        if (!slot || score(a) < score(*slot)) slot = &a;
    }
    AlternativeChoice c;
    if (other && idle && score(*other) > (1 + o.tie_margin) * score(*idle))
        c.recommended = idle;
    else
        c.recommended = other ? other : idle;
    if (c.recommended == other && idle &&
        std::abs(score(*other) - score(*idle)) <=
            o.tie_margin * std::max(score(*other), score(*idle)))
        c.tied_idle = idle;
    if (c.recommended) c.recommended->recommended = true;
    return c;
}

namespace {

std::vector<Figure> price_evidence(const PriceContext& c) {
    std::vector<Figure> ev = {{"cpu_cores", c.tw.cpu, "cores"},
                              {"work_cores", c.tw.work, "cores"},
                              {"spin_cores", c.tw.spin, "cores"},
                              {"sqes_per_second", c.tw.sqes, "1/s"},
                              {"wakeups_per_second", c.tw.wakeups, "1/s"},
                              {"sq_thread_idle_seconds", c.tw.b->idle_setting_seconds, "s"},
                              {"submit_syscall_seconds", c.o.submit_syscall_seconds, "s"},
                              {"wake_latency_seconds", c.wake_s, "s"}};
    if (c.tw.sqes > 0) ev.push_back({"cpu_seconds_per_sqe", c.tw.cpu / c.tw.sqes, "s"});
    return ev;
}

std::string tie_note(const Alternative& rec, const Alternative& idle, double sqes,
                     const AdviseOptions& o) {
    const double r = alternative_score(rec, sqes, o), i = alternative_score(idle, sqes, o);
    return fmt::format(
        "; a shorter sq_thread_idle ({:.1f}% of a CPU, {} of mean added delay) {} it by {:.0f}% "
        "of CPU plus weighted delay: a tie, for what a microsecond of delay is worth to decide",
        idle.cpu_cores * 100, fmt_seconds(idle.added_latency_seconds), i < r ? "beats" : "trails",
        100 * std::abs(r - i) / std::max(r, i));
}

// `after_idle`: the thread's CPU once an sq_idle_too_long finding is applied, or its CPU now.
// A thread that sq_thread_idle alone brings within price_ratio of every alternative needs no
// second finding; one that stays far above them (20 SQEs/s at 6 ms of spin each) does.
bool price_finding(const ThreadWindow& tw, const Snapshot& to, const AdviseOptions& o,
                   double window, double after_idle, Advice& out) {
    if (after_idle < o.price_min_cpu_cores) return false;
    PriceContext c{tw, to, o, window, 0, false};
    c.wake_s = wake_latency(*tw.a, *tw.b, o, c.measured_wake);
    std::vector<Alternative> alts = {price_now(c), price_no_sqpoll(c), price_idle(c),
                                     price_batch(c), price_ns_kernel(c)};
    double cheapest = after_idle;
    for (const auto& a : alts)
        if (a.available && a.name != "now" && a.name != "sq_thread_idle")
            cheapest = std::min(cheapest, a.cpu_cores);
    if (after_idle < o.price_ratio * cheapest) return false;
    const AlternativeChoice choice = choose_alternative(alts, tw.cpu, tw.sqes, o);
    const Alternative* rec = choice.recommended;
    if (!rec || rec->name == "sq_thread_idle") return false;  // sq_idle_too_long says it

    Finding f = thread_finding("sq_thread_overpriced", *tw.b);
    f.ring = tw.rings.empty() ? "" : tw.rings.front()->id;
    f.summary = fmt::format(
        "SQ thread uses {:.0f}% of a CPU for {:.0f} SQEs/s; {} would do the same for {:.1f}% "
        "({:.0f}x less)",
        tw.cpu * 100, tw.sqes, rec->name, rec->cpu_cores * 100,
        tw.cpu / std::max(rec->cpu_cores, 1e-9));
    if (choice.tied_idle) f.summary += tie_note(*rec, *choice.tied_idle, tw.sqes, o);
    f.evidence = price_evidence(c);
    f.change = rec->change;
    f.predicted = {{"cpu_cores", rec->cpu_cores, "cores"},
                   {"cpu_cores_saved", tw.cpu - rec->cpu_cores, "cores"},
                   {"wakeups_per_second", rec->wakeups_per_second, "1/s"},
                   {"added_latency_seconds", rec->added_latency_seconds, "s"}};
    f.assumption = fmt::format(
        "each alternative does the {:.0f} SQEs/s measured over {:.0f} s; a submission without "
        "SQPOLL costs {} ({}); a woken thread costs {} of delay ({}); one second of added delay "
        "is weighed as {:g} CPU-seconds",
        tw.sqes, window, fmt_seconds(o.submit_syscall_seconds), o.submit_cost_source,
        fmt_seconds(c.wake_s), c.measured_wake ? "measured median" : "assumed, no wake seen",
        o.wake_weight);
    f.alternatives = std::move(alts);
    out.findings.push_back(std::move(f));
    return true;
}

// --- shared_thread_backlog ------------------------------------------------------------------

void backlog_findings(const ThreadWindow& tw, const FromIndex& from, const AdviseOptions& o,
                      double window, Advice& out) {
    if (tw.rings.size() < 2) return;
    struct Waiting {
        const RingSnapshot* ring;
        double fraction, mean, sqes;
    };
    std::vector<Waiting> waiting;
    double total_sqes = 0;
    for (const auto* r : tw.rings) {
        const RingSnapshot* old = from.ring(*r);
        if (!old) continue;
        const double samples = delta(old->samples, r->samples);
        const double sqes = delta(old->sqes_total, r->sqes_total) / window;
        total_sqes += sqes;
        if (samples < 3) continue;
        const double frac = delta(old->samples_with_backlog, r->samples_with_backlog) / samples;
        if (frac >= o.backlog_min_fraction)
            waiting.push_back({r, frac, delta(old->backlog_sum, r->backlog_sum) / samples, sqes});
    }
    if (waiting.empty()) return;
    // The thread had no idle time to give: it is saturated, so rings wait for their turn.
    const double spin_share = tw.cpu > 0 ? tw.spin / tw.cpu : 1;
    if (spin_share > 0.2) return;
    const auto worst = std::max_element(waiting.begin(), waiting.end(), [](auto& x, auto& y) {
        return x.fraction * x.mean < y.fraction * y.mean;
    });
    const ThreadSnapshot& b = *tw.b;
    Finding f = thread_finding("shared_thread_backlog", b);
    f.subject = fmt::format("ring {}", worst->ring->id);
    f.ring = worst->ring->id;
    const double share = total_sqes > 0 ? worst->sqes / total_sqes : 0;
    f.summary = fmt::format(
        "ring {} had SQEs waiting in {:.0f}% of samples (mean {:.1f}) on SQ thread {}, which "
        "serves {} rings and is busy {:.0f}% of a CPU; it got {:.0f}% of the thread's SQEs",
        worst->ring->id, worst->fraction * 100, worst->mean, b.tid, tw.rings.size(), tw.cpu * 100,
        share * 100);
    f.evidence = {{"backlog_sample_fraction", worst->fraction, "ratio"},
                  {"backlog_mean_sqes", worst->mean, "sqes"},
                  {"ring_sqes_per_second", worst->sqes, "1/s"},
                  {"ring_share_of_thread", share, "ratio"},
                  {"thread_rings", static_cast<double>(tw.rings.size()), "rings"},
                  {"thread_cpu_cores", tw.cpu, "cores"},
                  {"thread_spin_cores", tw.spin, "cores"},
                  {"waiting_rings", static_cast<double>(waiting.size()), "rings"}};
    f.change = fmt::format(
        "give ring {} its own SQ thread: create it without IORING_SETUP_ATTACH_WQ{}",
        worst->ring->id,
        worst->mean > kSharedPassCap
            ? " (its backlog is deeper than the 8 SQEs a shared thread takes from each ring per "
              "pass, IORING_SQPOLL_CAP_ENTRIES_VALUE)"
            : "");
    // A thread busy `cpu` of a CPU moved total_sqes per second; alone on a CPU of its own the
    // ring can take up to the whole of that capacity instead of its turn in the rotation.
    const double capacity = tw.cpu > 0 ? total_sqes / std::min(1.0, tw.cpu) : 0;
    f.predicted = {{"ring_sqes_per_second_up_to", std::max(capacity, worst->sqes), "1/s"},
                   {"cpu_cores_added", std::min(1.0, tw.cpu), "cores"}};
    f.assumption =
        "a CPU is free for the new thread; the ring's SQEs cost the same alone, so "
        "its own thread can move as many per second as the shared one moves for all "
        "rings now; whether the ring then keeps up depends on how fast the application "
        "submits, which a backlog hides";
    out.findings.push_back(std::move(f));
}

// --- sq_threads_should_share ----------------------------------------------------------------

// The group's ways of doing its SQEs, priced side by side: as now, on one shared thread, and
// without SQPOLL at all. Sharing is priced for the whole group, not per thread: each thread's
// marginal cost of joining another that spins anyway is near zero, and all of them cannot join
// each other.
std::vector<Alternative> share_alternatives(const std::vector<const ThreadWindow*>& group,
                                            double merged, double merged_wakes,
                                            const AdviseOptions& o) {
    Alternative now, share;
    now.name = "now";
    share.name = "share_sq_thread";
    double sqes = 0, work = 0, wake_s = o.assumed_wake_latency_seconds;
    bool measured = false;
    for (const auto* tw : group) {
        now.cpu_cores += tw->cpu;
        now.wakeups_per_second += tw->wakeups;
        sqes += tw->sqes;
        work += tw->work;
        if (!measured) wake_s = wake_latency(*tw->a, *tw->b, o, measured);
    }
    now.added_latency_seconds = wake_delay(sqes, now.wakeups_per_second, wake_s);
    share.change = "one SQ thread for the rings of all of them (IORING_SETUP_ATTACH_WQ)";
    share.cpu_cores = merged;
    share.wakeups_per_second = merged_wakes;
    share.added_latency_seconds = wake_delay(sqes, merged_wakes, wake_s);
    share.recommended = true;
    share.note = "busy periods independent; the combined work fits one thread";
    Alternative plain = no_sqpoll_price(work, sqes, o);
    plain.change = "create the rings without IORING_SETUP_SQPOLL and submit with io_uring_enter";
    plain.note += fmt::format(
        "; sq_thread_overpriced speaks for a thread that costs {:g}x more "
        "than this",
        o.price_ratio);
    return {now, share, plain};
}

void share_findings(const std::vector<ThreadWindow>& windows, const AdviseOptions& o, Advice& out) {
    std::map<std::uint32_t, std::vector<const ThreadWindow*>> by_pid;
    for (const auto& tw : windows) {
        if (tw.cpu < 0.05 || tw.cpu <= 0) continue;
        if (tw.spin / tw.cpu < o.share_min_spin_fraction) continue;
        by_pid[tw.b->pid].push_back(&tw);
    }
    for (auto& [pid, group] : by_pid) {
        if (group.size() < 2) continue;
        // Threads pinned to different CPUs were placed on purpose; only merge the unpinned ones
        // and those pinned to the same CPU.
        std::set<std::int32_t> pinned_cpus;
        for (const auto* tw : group)
            if (tw->b->pinned) pinned_cpus.insert(tw->b->sq_cpu);
        if (pinned_cpus.size() > 1) continue;
        // A thread that never sleeps wants the whole CPU; what it got (u) only says how much
        // the scheduler could give it. Its busy fraction is 1, and so is the shared thread's.
        auto busy = [](const ThreadWindow* tw) {
            return tw->sleeps < 0.5 ? 1.0 : std::min(1.0, tw->cpu);
        };
        double sum_cpu = 0, sum_work = 0, idle_all = 1;
        for (const auto* tw : group) {
            sum_cpu += tw->cpu;
            sum_work += tw->work;
            idle_all *= 1 - busy(tw);
        }
        if (sum_work > o.share_max_work_cores) continue;
        const double merged = std::max(sum_work, 1 - idle_all);
        double wakes = 0;
        for (const auto* tw : group) {
            double others_idle = 1;
            for (const auto* other : group)
                if (other != tw) others_idle *= 1 - busy(other);
            wakes += tw->wakeups * others_idle;
        }
        const double saving = sum_cpu - merged;
        if (saving < o.min_cpu_saving_cores) continue;
        const ThreadSnapshot& first = *group.front()->b;
        Finding f = thread_finding("sq_threads_should_share", first);
        std::string tids, rings;
        for (const auto* tw : group) {
            tids += (tids.empty() ? "" : ",") + std::to_string(tw->b->tid);
            for (const auto* r : tw->rings) rings += (rings.empty() ? "" : ", ") + r->id;
        }
        f.subject = "sq_threads " + tids;
        f.summary = fmt::format(
            "{} SQ threads of pid {} ({}) each spin most of their time: {:.0f}% of a CPU "
            "together for {:.0f}% of work",
            group.size(), pid, first.comm, sum_cpu * 100, sum_work * 100);
        f.evidence = {{"threads", static_cast<double>(group.size()), "threads"},
                      {"cpu_cores", sum_cpu, "cores"},
                      {"work_cores", sum_work, "cores"}};
        for (const auto* tw : group)
            f.evidence.push_back(
                {fmt::format("sq_thread_{}_cpu_cores", tw->b->tid), tw->cpu, "cores"});
        const auto& owner = group.front()->rings;
        f.change = fmt::format(
            "create the rings {} with IORING_SETUP_ATTACH_WQ and wq_fd = the fd of ring {}, so "
            "one SQ thread serves them all{}",
            rings, owner.empty() ? std::string("?") : owner.front()->id,
            pinned_cpus.empty() ? ""
                                : fmt::format(" (pinned to CPU {} with IORING_SETUP_SQ_AFF)",
                                              *pinned_cpus.begin()));
        f.predicted = {{"cpu_cores", merged, "cores"},
                       {"cpu_cores_saved", saving, "cores"},
                       {"wakeups_per_second", wakes, "1/s"}};
        f.alternatives = share_alternatives(group, merged, wakes, o);
        f.assumption =
            "the threads' busy periods are independent, so the shared thread is busy when any "
            "of them would be (1 - product of their idle fractions), and a thread that never "
            "sleeps counts as busy all the time, so the shared one never sleeps either and "
            "takes one whole CPU; their combined work fits in one thread; a shared thread "
            "takes at most 8 SQEs per ring per pass";
        out.findings.push_back(std::move(f));
    }
}

// --- iopoll_without_poll_queues ------------------------------------------------------------

void poll_queue_findings(const Snapshot& from, const Snapshot& to, Advice& out) {
    for (const auto& d : to.devices) {
        if (!d.iopoll_without_poll_queues) continue;
        const DeviceSnapshot* old = find_device(from, d.name);
        const double intent = old ? delta(old->polled_intent_irq, d.polled_intent_irq)
                                  : static_cast<double>(d.polled_intent_irq);
        const double all = old ? delta(old->polled, d.polled) + delta(old->irq, d.irq)
                               : static_cast<double>(d.polled + d.irq);
        Finding f;
        f.id = "iopoll_without_poll_queues";
        f.subject = "device " + d.name;
        f.device = d.name;
        const double share = all > 0 ? intent / all : 1;
        f.summary = fmt::format(
            "{}: {:.0f}% of uring_cmd completions were polled requests finished by an "
            "interrupt: IOPOLL spins on a device without poll queues",
            d.name, share * 100);
        f.evidence = {{"polled_requests_completed_by_irq", intent, "requests"},
                      {"irq_completed_share", share, "ratio"},
                      {"polls_per_completion", d.polls_per_completion, "ratio"}};
        f.change =
            "give the nvme driver poll queues: nvme.poll_queues=N on the kernel command "
            "line, or 'options nvme poll_queues=N' in /etc/modprobe.d and reload nvme";
        f.predicted = {{"irq_completed_share", 0, "ratio"}, {"polled_share", 1, "ratio"}};
        f.assumption =
            "the controller grants the extra queue pairs; until then every polled "
            "request waits for its interrupt while the poller spins";
        out.findings.push_back(std::move(f));
    }
}

// Gap bucket contribution to the model: CPU (ns) and sleeps for gaps in one bucket.
void add_bucket(double c, double sum_ns, double lo, double hi, double t_ns, double& cpu,
                double& sleeps) {
    if (c == 0) return;
    if (hi <= t_ns) {
        cpu += sum_ns;
    } else if (lo >= t_ns || !std::isfinite(hi)) {
        cpu += c * t_ns;
        sleeps += c;
    } else {
        // The threshold falls inside: spread the bucket's gaps evenly over it.
        const double f = (t_ns - lo) / (hi - lo);
        cpu += c * f * (lo + t_ns) / 2 + c * (1 - f) * t_ns;
        sleeps += c * (1 - f);
    }
}

}  // namespace

GapWindow gap_window(const WorkGaps& from, const WorkGaps& to, double window_s) {
    GapWindow w;
    w.window_s = window_s;
    w.count.assign(to.count.size(), 0);
    w.sum_ns.assign(to.count.size(), 0);
    for (std::size_t i = 0; i < to.count.size() && i < to.sum_ns.size(); ++i) {
        const std::uint64_t c0 = i < from.count.size() ? from.count[i] : 0;
        const std::uint64_t s0 = i < from.sum_ns.size() ? from.sum_ns[i] : 0;
        w.count[i] = static_cast<double>(to.count[i] - std::min(to.count[i], c0));
        w.sum_ns[i] = static_cast<double>(to.sum_ns[i] - std::min(to.sum_ns[i], s0));
    }
    if (to.recorded_seconds >= 0 && from.recorded_seconds >= 0) {
        const double recorded = to.recorded_seconds - from.recorded_seconds;
        const double scale = recorded > 0 ? window_s / recorded : 0;
        for (std::size_t i = 0; i < w.count.size(); ++i) {
            w.count[i] *= scale;
            w.sum_ns[i] *= scale;
        }
        return w;
    }
    w.open_start_s = std::max(0.0, from.open_gap_seconds);
    w.open_end_s = std::max(0.0, to.open_gap_seconds);
    // No SQE at all in the window: the gap open at its start simply grew.
    return w;
}

GapWindow thread_gap_window(const ThreadSnapshot& from, const ThreadSnapshot& to, double window_s) {
    GapWindow w = gap_window(from.gaps, to.gaps, window_s);
    double gaps = 0;
    for (auto c : w.count) gaps += c;
    if (gaps > 0) w.work_per_gap_s = std::max(0.0, to.work_seconds - from.work_seconds) / gaps;
    return w;
}

IdleCost idle_cost_fixed(const GapWindow& w, double spin_s) {
    const double t = spin_s * 1e9;
    double cpu = 0, sleeps = 0;
    for (std::size_t i = 0; i < w.count.size(); ++i)
        add_bucket(w.count[i], w.sum_ns[i], gap_bucket_lower_ns(i), gap_bucket_upper_ns(i), t, cpu,
                   sleeps);
    // The gap open at the start ended inside the window (and is in the buckets) or is still
    // open at the end; either way its part before the window is not ours to count.
    cpu += std::min(w.open_end_s * 1e9, t);
    cpu -= std::min(w.open_start_s * 1e9, t);
    // A gap open at both ends with no SQE in between is one gap, not two.
    // Each sleep is followed by the work of the batch that ends it, which its gap holds but its
    // charge (the idle) left out.
    cpu += sleeps * w.work_per_gap_s * 1e9;
    IdleCost c;
    c.cpu_seconds = std::clamp(cpu / 1e9, 0.0, w.window_s);
    c.wakeups = sleeps;
    return c;
}

IdleCost idle_cost_jiffies(const GapWindow& w, std::uint64_t jiffies, unsigned hz) {
    constexpr int kSteps = 8;
    const double tick = 1.0 / hz;
    IdleCost sum;
    for (int k = 0; k < kSteps; ++k) {
        auto c = idle_cost_fixed(w, (jiffies + (k + 0.5) / kSteps) * tick);
        sum.cpu_seconds += c.cpu_seconds / kSteps;
        sum.wakeups += c.wakeups / kSteps;
    }
    return sum;
}

std::vector<IdleCurvePoint> idle_curve(const GapWindow& w, double current_s, bool current_ns,
                                       bool candidates_ns, unsigned hz) {
    std::vector<IdleCurvePoint> out;
    if (w.window_s <= 0) return out;
    auto add = [&](double setting, double effective, IdleCost c, bool current) {
        IdleCurvePoint p;
        p.setting_seconds = setting;
        p.effective_seconds = effective;
        p.cpu_cores = c.cpu_seconds / w.window_s;
        p.wakeups_per_second = c.wakeups / w.window_s;
        p.current = current;
        out.push_back(p);
    };
    static const double kMs[] = {1, 2, 3, 4, 5, 8, 10, 15, 20, 30, 50, 100, 200, 500, 1000, 2000};
    if (!current_ns && hz == 0) return out;
    if (candidates_ns) {
        static const double kUs[] = {20, 50, 100, 200, 500};
        std::set<double> settings(std::begin(kUs), std::end(kUs));
        for (double ms : kMs) settings.insert(ms * 1e3);
        // A jiffies setting of the same nominal value is another setting: keep both.
        for (double us : settings)
            if (!current_ns || std::abs(us * 1e-6 - current_s) > 1e-9)
                add(us * 1e-6, us * 1e-6, idle_cost_fixed(w, us * 1e-6), false);
        if (current_ns) {
            add(current_s, current_s, idle_cost_fixed(w, current_s), true);
        } else {
            const auto cur_j = static_cast<std::uint64_t>(std::llround(current_s * hz));
            add(current_s, (cur_j + 0.5) / hz, idle_cost_jiffies(w, cur_j, hz), true);
        }
    } else {
        if (hz == 0) return out;
        // msecs_to_jiffies() rounds up; several ms values share a tick count: keep the smallest.
        const auto cur_j = static_cast<std::uint64_t>(std::llround(current_s * hz));
        std::map<std::uint64_t, double> by_jiffies;
        for (double ms : kMs) {
            const auto j = static_cast<std::uint64_t>(std::ceil(ms * hz / 1000 - 1e-9));
            if (j != cur_j) by_jiffies.try_emplace(j, ms / 1e3);
        }
        for (const auto& [j, setting] : by_jiffies)
            add(setting, (j + 0.5) / hz, idle_cost_jiffies(w, j, hz), false);
        add(current_s, (cur_j + 0.5) / hz, idle_cost_jiffies(w, cur_j, hz), true);
    }
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.setting_seconds < b.setting_seconds; });
    return out;
}

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

    for (const auto& tw : windows) {
        // A thread with no work gets the stronger advice; the idle curve would say the same.
        if (idle_ring_finding(tw, o, window, out)) continue;
        const auto after_idle = idle_finding(tw, to, o, window, out);
        price_finding(tw, to, o, window, after_idle.value_or(tw.cpu), out);
        backlog_findings(tw, index, o, window, out);
    }
    share_findings(windows, o, out);
    poll_queue_findings(from, to, out);
    if (!out.gaps_available && !windows.empty())
        out.notes.push_back(
            "no idle-time curves: they need the deep tier's work_gaps probe "
            "(iouscoped --probes.deep)");
    return out;
}

Advice AdviceWindow::update(const std::shared_ptr<const Snapshot>& now) {
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
        history_.push_back(now);
    return a;
}

}  // namespace iouscope
