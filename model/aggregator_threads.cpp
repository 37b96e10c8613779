// The thread stage of Aggregator::update: each SQ thread's identity under tid reuse, what its
// rings did in the interval, its counts, rates, shares and fairness, and its wakers. The CPU
// split, the scheduler's view and the loop's are in aggregator_cpu_split, _sched and _loop.
#include <algorithm>
#include <iterator>

#include "model/aggregator_update.hpp"

namespace iouscope {

using namespace aggregation;

namespace {

double idle_seconds(const iou_ring_record& r, unsigned hz) {
    if (r.sq_idle_unit == IOU_IDLE_NS) return static_cast<double>(r.sq_thread_idle) / 1e9;
    if (hz == 0) return 0;  // not known yet
    return static_cast<double>(r.sq_thread_idle) / hz;
}

WakerSnapshot waker_of(const std::pair<iou_waker_key, iou_waker_val>& w) {
    WakerSnapshot out{w.first.waker_pid, comm_of(w.second.comm), w.second.count, "task"};
    if (w.first.context == IOU_WAKER_IRQ) out.context = out.comm = "irq";
    return out;
}

}  // namespace

// What a thread's rings did in the interval, summed.
ThreadSnapshot Aggregator::observe_thread(UpdateContext& cx, std::int32_t tid, Members members,
                                          std::vector<RingSnapshot>& rings) {
    // Its first ring's record carries the thread's fields.
    const iou_ring_record& rec = *cx.ix.live[members.front().first].second;
    ThreadState& st = thread_identity(cx.raw, tid, rec, rings[members.front().first]);
    // BPF entries under this tid count only if they are this thread's (records.h).
    const auto owned = [&](const auto& index) {
        const auto* x = first_of(index, static_cast<std::uint32_t>(tid));
        return x && x->owner_start_ns == rec.sq_start_ns ? x : nullptr;
    };
    const iou_sched_state* ss = owned(cx.ix.sched);
    const iou_sq_passes* own_passes = owned(cx.ix.passes);
    MemberTotals m;
    for (const auto& [idx, d] : members) {
        m.sqes += d.sqes;
        m.cqes += d.cqes;
        m.deep_work_ns += d.deep_work_ns;
        m.sqes_total += rings[idx].sqes_total;
        m.pinned = m.pinned || (rings[idx].setup_flags & IOU_SETUP_SQ_AFF);
    }

    ThreadSnapshot ts = thread_basics(tid, rec, st, members.size());
    ts.cgroup = labels_of(rec.sq_cgroup_id);
    ts.pinned = m.pinned;
    const std::uint64_t cpu_ns = thread_cpu_ns(rec, st, cx.raw.mono_ns);
    auto [sleep_ns, block_ns] = asleep_totals(ss, cx.raw.mono_ns);
    note_untraced(cx, rec, ss, cpu_ns, sleep_ns + block_ns, st);
    const UntracedSleeps& u = st.untraced;
    // Without the sched tracepoints, voluntary switches are the best count of sleeps.
    ts.sleeps = ss ? ss->sleeps + u.sleeps : rec.sq_nvcsw;
    ts.wakeups = (ss ? ss->wakeups : 0) + u.wakeups;
    ts.untraced_wakeups = u.wakeups;
    ts.blocks = ss ? ss->blocks : 0;
    const bool split_was_started = st.split_started;
    split_thread_cpu(cx.raw, rec, st, m, own_passes, cpu_ns, ts);
    sleep_ns += u.sleep_ns;
    const std::uint64_t prev_sleep_total = st.sleep_ns;
    st.sleep_ns = std::max(st.sleep_ns, sleep_ns);
    st.block_ns = std::max(st.block_ns, block_ns);
    ts.cpu_seconds = cpu_ns / 1e9;
    ts.work_seconds = st.work_ns / 1e9;
    ts.spin_seconds = st.spin_ns / 1e9;
    ts.sleep_seconds = st.sleep_ns / 1e9;
    ts.block_seconds = st.block_ns / 1e9;
    if (st.seen_before && cx.interval > 0)
        thread_rates(cx.interval, st, cpu_ns, prev_sleep_total, split_was_started, m.sqes, ts);
    if (ss) thread_wake_latency(*ss, st, ts);
    shares_and_fairness(members, m.sqes, rings, ts);
    if (const iou_work_gaps* g = owned(cx.ix.gaps)) thread_gaps(*g, cx.raw, ts);
    if (own_passes) thread_passes(*own_passes, cx.interval, st, ts);
    for (const auto& [sq_tid, w] : entries_of(cx.ix.wakers, static_cast<std::uint32_t>(tid)))
        if (w->second.sq_start_ns == rec.sq_start_ns) ts.wakers.push_back(waker_of(*w));
    std::sort(ts.wakers.begin(), ts.wakers.end(),
              [](const auto& a, const auto& b) { return a.wakeups > b.wakeups; });

    st.prev_cpu_ns = cpu_ns;
    st.prev_nvcsw = rec.sq_nvcsw;
    st.prev_work_ns = st.work_ns;
    st.prev_sleeps = ts.sleeps;
    st.prev_wakeups = ts.wakeups;
    st.prev_blocks = ts.blocks;
    st.seen_before = true;
    return ts;
}

// The thread's state, started afresh when another thread took the tid.
Aggregator::ThreadState& Aggregator::thread_identity(const RawSample& raw, std::int32_t tid,
                                                     const iou_ring_record& rec,
                                                     const RingSnapshot& first_ring) {
    auto& st = threads_[static_cast<std::uint32_t>(tid)];
    // Another thread under a reused tid: nothing of the old one's carries over.
    if (st.seen_before && st.start_ns != rec.sq_start_ns) {
        st = ThreadState{};
        ++threads_replaced_;
    }
    st.start_ns = rec.sq_start_ns;
    st.missing = 0;
    if (!st.seen_before) {
        // The thread's own process, which may hold none of the rings it serves.
        const std::string own_comm = comm_of(rec.sq_comm);
        st.pid = rec.sq_tgid ? rec.sq_tgid : first_ring.pid;
        st.comm = own_comm.empty() ? first_ring.comm : own_comm;
        st.start_time_unix = mono_to_unix(raw, rec.sq_start_ns);
    }
    return st;
}

ThreadSnapshot Aggregator::thread_basics(std::int32_t tid, const iou_ring_record& rec,
                                         const ThreadState& st, std::size_t rings) const {
    ThreadSnapshot ts;
    ts.tid = tid;
    ts.pid = st.pid;
    ts.comm = st.comm;
    ts.start_time_seconds = st.start_time_unix;
    ts.voluntary_switches = rec.sq_nvcsw;
    ts.involuntary_switches = rec.sq_nivcsw;
    ts.state = rec.sq_state;
    ts.sq_cpu = rec.sq_cpu;
    ts.idle_setting_seconds = idle_seconds(rec, hz_);
    ts.idle_ns_granular = rec.sq_idle_unit == IOU_IDLE_NS;
    ts.shared_percpu = (rec.caps & IOU_CAP_SQD_PERCPU) != 0;
    ts.rings = rings;
    return ts;
}

void Aggregator::thread_rates(double interval, const ThreadState& st, std::uint64_t cpu_ns,
                              std::uint64_t prev_sleep_total, bool split_was_started,
                              std::uint64_t dsqes, ThreadSnapshot& ts) {
    const double ns = interval * 1e9;
    ts.cpu_util = (cpu_ns - std::min(cpu_ns, st.prev_cpu_ns)) / ns;
    // The interval in which the split starts carries the history: no rate from it.
    if (split_was_started) {
        ts.work_util = (st.work_ns - std::min(st.work_ns, st.prev_work_ns)) / ns;
        ts.spin_util = std::max(0.0, ts.cpu_util - ts.work_util);
    }
    ts.sleep_util = (st.sleep_ns - prev_sleep_total) / ns;
    ts.sqe_rate = dsqes / interval;
    ts.sleep_rate = (ts.sleeps - std::min(ts.sleeps, st.prev_sleeps)) / interval;
    ts.wakeup_rate = (ts.wakeups - std::min(ts.wakeups, st.prev_wakeups)) / interval;
    ts.block_rate = (ts.blocks - std::min(ts.blocks, st.prev_blocks)) / interval;
}

// Each ring's share of the thread's SQEs, Jain's fairness among the rings that wanted service
// in the interval (those that got some, and those left with a backlog), and the deep tier's
// per-ring work summed.
void Aggregator::shares_and_fairness(Members members, std::uint64_t dsqes,
                                     std::vector<RingSnapshot>& rings, ThreadSnapshot& ts) {
    std::vector<double> demand;
    for (const auto& [idx, d] : members) {
        auto& ring = rings[idx];
        ring.sqthread_share = dsqes ? static_cast<double>(d.sqes) / dsqes : 0;
        if (d.sqes > 0 || ring.sq_backlog > 0) demand.push_back(static_cast<double>(d.sqes));
        if (ring.has_sqthread_work)
            ts.rings_work_seconds =
                std::max(0.0, ts.rings_work_seconds) + ring.sqthread_work_seconds;
    }
    ts.fairness = jain_fairness(demand);
}

}  // namespace iouscope
