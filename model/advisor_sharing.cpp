// The findings about SQ threads that share, or should: shared_thread_backlog, rings waiting for
// their turn on a saturated shared thread, and sq_threads_should_share, spinning SQ threads of one
// process that one thread could serve (IORING_SETUP_ATTACH_WQ), priced beside the alternatives.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "model/advisor_findings.hpp"
#include "model/advisor_pricing.hpp"

namespace iouscope::advisor {

namespace {

// IORING_SQPOLL_CAP_ENTRIES_VALUE: with more than one ring on a thread, each pass takes at most
// this many SQEs from each ring.
constexpr double kSharedPassCap = 8;

}  // namespace

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

namespace {

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

// One process's SQ threads merged onto one: what they cost now and what the shared one would.
struct MergedGroup {
    double sum_cpu = 0, sum_work = 0;  // the threads as they run, cores
    double merged = 0;                 // the shared thread's CPU, cores
    double wakes = 0;                  // its wakeups per second
};

MergedGroup merge_group(const std::vector<const ThreadWindow*>& group) {
    // A thread that never sleeps wants the whole CPU; what it got (u) only says how much
    // the scheduler could give it. Its busy fraction is 1, and so is the shared thread's.
    auto busy = [](const ThreadWindow* tw) {
        return tw->sleeps < 0.5 ? 1.0 : std::min(1.0, tw->cpu);
    };
    MergedGroup m;
    double idle_all = 1;
    for (const auto* tw : group) {
        m.sum_cpu += tw->cpu;
        m.sum_work += tw->work;
        idle_all *= 1 - busy(tw);
    }
    m.merged = std::max(m.sum_work, 1 - idle_all);
    for (const auto* tw : group) {
        double others_idle = 1;
        for (const auto* other : group)
            if (other != tw) others_idle *= 1 - busy(other);
        m.wakes += tw->wakeups * others_idle;
    }
    return m;
}

Finding share_finding(std::uint32_t pid, const std::vector<const ThreadWindow*>& group,
                      const std::set<std::int32_t>& pinned_cpus, const MergedGroup& m,
                      double saving, const AdviseOptions& o) {
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
        group.size(), pid, first.comm, m.sum_cpu * 100, m.sum_work * 100);
    f.evidence = {{"threads", static_cast<double>(group.size()), "threads"},
                  {"cpu_cores", m.sum_cpu, "cores"},
                  {"work_cores", m.sum_work, "cores"}};
    for (const auto* tw : group)
        f.evidence.push_back({fmt::format("sq_thread_{}_cpu_cores", tw->b->tid), tw->cpu, "cores"});
    const auto& owner = group.front()->rings;
    f.change = fmt::format(
        "create the rings {} with IORING_SETUP_ATTACH_WQ and wq_fd = the fd of ring {}, so "
        "one SQ thread serves them all{}",
        rings, owner.empty() ? std::string("?") : owner.front()->id,
        pinned_cpus.empty()
            ? ""
            : fmt::format(" (pinned to CPU {} with IORING_SETUP_SQ_AFF)", *pinned_cpus.begin()));
    f.predicted = {{"cpu_cores", m.merged, "cores"},
                   {"cpu_cores_saved", saving, "cores"},
                   {"wakeups_per_second", m.wakes, "1/s"}};
    f.alternatives = share_alternatives(group, m.merged, m.wakes, o);
    f.assumption =
        "the threads' busy periods are independent, so the shared thread is busy when any "
        "of them would be (1 - product of their idle fractions), and a thread that never "
        "sleeps counts as busy all the time, so the shared one never sleeps either and "
        "takes one whole CPU; their combined work fits in one thread; a shared thread "
        "takes at most 8 SQEs per ring per pass";
    return f;
}

}  // namespace

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
        const MergedGroup m = merge_group(group);
        if (m.sum_work > o.share_max_work_cores) continue;
        const double saving = m.sum_cpu - m.merged;
        if (saving < o.min_cpu_saving_cores) continue;
        out.findings.push_back(share_finding(pid, group, pinned_cpus, m, saving, o));
    }
}

}  // namespace iouscope::advisor
