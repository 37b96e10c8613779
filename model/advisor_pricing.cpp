// The prices of an SQ thread's alternatives (model/advisor_pricing.hpp), and the choice among
// them (choose_alternative, model/advisor.hpp).
#include "model/advisor_pricing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace iouscope::advisor {

double wake_delay(double sqes, double wakeups_per_second, double wake_s) {
    if (sqes <= 0) return 0;
    return std::min(1.0, wakeups_per_second / sqes) * wake_s;
}

double wake_delay(const PriceContext& c, double wakeups_per_second) {
    return wake_delay(c.tw.sqes, wakeups_per_second, c.wake_s);
}

Alternative no_sqpoll_price(double work, double sqes, const AdviseOptions& o) {
    Alternative a;
    a.name = "no_sqpoll";
    a.cpu_cores = work + sqes * o.submit_syscall_seconds;
    a.added_latency_seconds = o.submit_syscall_seconds;
    a.note = fmt::format("one io_uring_enter per SQE at {} ({})",
                         fmt_seconds(o.submit_syscall_seconds), o.submit_cost_source);
    return a;
}

namespace {

// Mean spin after the last SQE at the shortest setting: upstream rounds sq_thread_idle up to
// whole jiffies (1 ms is one tick) and spins up to a tick more. 0 with nanosecond idle.
double shortest_mean_spin(const ThreadSnapshot& b, const Snapshot& to) {
    if (ns_settable(b, to) || to.hz == 0) return 0;
    const unsigned hz = to.hz;
    return 1.5 / hz;
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

}  // namespace

std::vector<Alternative> price_alternatives(const PriceContext& c) {
    return {price_now(c), price_no_sqpoll(c), price_idle(c), price_batch(c), price_ns_kernel(c)};
}

double alternative_score(const Alternative& a, double sqes, const AdviseOptions& o) {
    return a.cpu_cores + o.wake_weight * a.added_latency_seconds * sqes;
}

}  // namespace iouscope::advisor

namespace iouscope {

using namespace advisor;

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

}  // namespace iouscope
