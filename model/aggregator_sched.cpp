// What the scheduler says of an SQ thread: its CPU time at the sample's instant, its sleeps so
// far, wake latency, and the scheduler gate's ledger of what the sched programs did not see
// (model/sched_gate.hpp) with the threads the gate reads.
#include <algorithm>
#include <iterator>

#include "model/aggregator_update.hpp"

namespace iouscope {

namespace aggregation {

std::pair<std::uint64_t, std::uint64_t> asleep_totals(const iou_sched_state* ss,
                                                      std::uint64_t mono_ns) {
    if (!ss) return {0, 0};
    std::uint64_t sleep_ns = ss->sleep_ns, block_ns = ss->block_ns;
    if (ss->sleep_start_ns && mono_ns > ss->sleep_start_ns)
        (ss->blocked ? block_ns : sleep_ns) += mono_ns - ss->sleep_start_ns;
    return {sleep_ns, block_ns};
}

}  // namespace aggregation

using namespace aggregation;

std::uint64_t Aggregator::thread_cpu_ns(const iou_ring_record& rec, const ThreadState& st,
                                        std::uint64_t at_ns) const {
    std::uint64_t ns = rec.sq_runtime_ns;
    if (rec.caps & IOU_CAP_RUNNING) {
        ns += rec.sq_running_ns;
        // On its CPU since sq_oncpu_ns, the thread's CPU time grows with the clock: given at the
        // sample's instant, not at this record's read, which a walk split over several read()s
        // (preempted in between) can put hundreds of ms later. Switched in after the instant:
        // one that slept or blocked since the last sample had at most what it had at the
        // switch-in; one that did not was only preempted, and ran until shortly before it (on a
        // nohz_full CPU, for all but a kworker's few us), so its time counts back from there.
        // Taking the first bound for both read 0.83 s of CPU per second for a thread that never
        // left its isolated CPU.
        const bool only_preempted = st.seen_before && rec.sq_nvcsw == st.prev_nvcsw;
        const std::uint64_t from =
            only_preempted ? at_ns : std::max<std::uint64_t>(at_ns, rec.sq_oncpu_ns);
        if (rec.read_ns > from) ns -= std::min<std::uint64_t>(ns, rec.read_ns - from);
    }
    // The running part is timed from the switch-in on the monotonic clock while sum_exec_runtime
    // follows the scheduler's clock; where the two drift (the TCG guests' vCPU clocks), a total
    // can come out under the last one. CPU time never goes back.
    return st.seen_before ? std::max(ns, st.prev_cpu_ns) : ns;
}

// Feeds the scheduler gate's ledger (model/sched_gate.hpp) one interval of the thread: those
// where the gate had the programs detached, and those that follow while a sleep begun then is
// still open. A thread first seen in such an interval was born in it. asleep_ns is the
// programs' sleep and block time so far, open ones up to the walk (asleep_totals()).
void Aggregator::note_untraced(const UpdateContext& cx, const iou_ring_record& rec,
                               const iou_sched_state* ss, std::uint64_t cpu_ns,
                               std::uint64_t asleep_ns, ThreadState& st) {
    const std::uint64_t now = cx.raw.mono_ns;
    const std::uint64_t switches = ss ? ss->sleeps + ss->blocks : 0;
    const std::uint64_t off = asleep_ns + (ss ? ss->lat_sum_ns : 0);
    if (cx.raw.sched_untraced || st.untraced.open) {
        const std::uint64_t since = st.seen_before
                                        ? st.prev_seen_ns
                                        : std::max<std::uint64_t>(rec.sq_start_ns, cx.prev_mono_ns);
        const auto d = [](std::uint64_t a, std::uint64_t b) { return a - std::min(a, b); };
        GateInterval in;
        in.traced = !cx.raw.sched_untraced;
        in.wall_ns = d(now, since);
        in.cpu_ns = d(cpu_ns, st.seen_before ? st.prev_cpu_ns : 0);
        in.nvcsw = d(rec.sq_nvcsw, st.seen_before ? st.prev_nvcsw : 0);
        in.traced_switches = d(switches, st.prev_traced_switches);
        in.traced_off_ns = d(off, st.prev_traced_off_ns);
        in.asleep = rec.sq_state != 0;
        in.traced_sleep_open = ss && ss->sleep_start_ns;
        account_untraced(st.untraced, in);
    }
    st.switched =
        !st.seen_before || st.prev_seen_ns != cx.prev_mono_ns || rec.sq_nvcsw != st.prev_nvcsw;
    st.fresh = !st.seen_before;
    st.prev_traced_switches = switches;
    st.prev_traced_off_ns = off;
    st.prev_seen_ns = now;
    st.running = rec.sq_state == 0;
    st.sleep_open = ss && ss->sleep_start_ns;
}

std::vector<GateThread> Aggregator::gate_threads() const {
    std::vector<GateThread> out;
    for (const auto& [tid, st] : threads_)
        if (st.seen_before && st.missing == 0 && st.prev_seen_ns == prev_mono_ns_)
            out.push_back({st.switched, st.running, st.sleep_open, st.untraced.open, st.fresh});
    return out;
}

void Aggregator::thread_wake_latency(const iou_sched_state& ss, ThreadState& st,
                                     ThreadSnapshot& ts) {
    ts.wake_latency_log2.assign(std::begin(ss.lat_hist), std::end(ss.lat_hist));
    ts.wake_latency = latency_histogram(ts.wake_latency_log2, ss.lat_sum_ns);
    // Quantiles of this interval alone, from the difference of the cumulative buckets.
    std::vector<std::uint64_t> delta(ts.wake_latency_log2);
    if (st.prev_lat_hist.size() == delta.size())
        for (std::size_t i = 0; i < delta.size(); ++i)
            delta[i] -= std::min(delta[i], st.prev_lat_hist[i]);
    if (auto p50 = log2_quantile(delta, 0.50)) ts.wake_p50_seconds = *p50 / 1e9;
    if (auto p99 = log2_quantile(delta, 0.99)) ts.wake_p99_seconds = *p99 / 1e9;
    st.prev_lat_hist = ts.wake_latency_log2;
}

}  // namespace iouscope
