// sq_thread_overpriced: the thread's price against what the same SQEs would cost done otherwise
// (model/advisor_pricing.hpp), from measured figures, whatever the SQE rate: the fixed thresholds
// of the idle and spin findings miss a thread at 100 % for a modest rate whose gaps no
// sq_thread_idle can span.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "model/advisor_findings.hpp"
#include "model/advisor_pricing.hpp"

namespace iouscope::advisor {

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

}  // namespace

bool price_finding(const ThreadWindow& tw, const Snapshot& to, const AdviseOptions& o,
                   double window, double after_idle, Advice& out) {
    if (after_idle < o.price_min_cpu_cores) return false;
    PriceContext c{tw, to, o, window, 0, false};
    c.wake_s = wake_latency(*tw.a, *tw.b, o, c.measured_wake);
    std::vector<Alternative> alts = price_alternatives(c);
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

}  // namespace iouscope::advisor
