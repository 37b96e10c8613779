// The ring stage of Aggregator::update: each ring's identity, its SQ and CQ counters, backlog
// and rates, its io_do_iopoll figures and its SQ thread's deep-tier work on it, and the deltas it
// hands to its SQ thread (UpdateContext::by_thread).
#include <algorithm>
#include <cstring>
#include <string>

#include "model/aggregator_update.hpp"

namespace iouscope {

using namespace aggregation;

namespace {

template <class T>
void prefetch(const T* p) {
    const char* c = reinterpret_cast<const char*>(p);
    for (std::size_t off = 0; off < sizeof(T); off += 64) __builtin_prefetch(c + off);
}

}  // namespace

std::string ring_mode(std::uint32_t flags) {
    bool sq = flags & IOU_SETUP_SQPOLL, io = flags & IOU_SETUP_IOPOLL;
    if (sq && io) return "both";
    if (sq) return "sqpoll";
    if (io) return "iopoll";
    return "plain";
}

// Every live ring, in ascending ctx, with its state (end_ring_lives aligned the states with them).
void Aggregator::observe_rings(UpdateContext& cx, std::vector<RingSnapshot>& rings) {
    const auto& live = cx.ix.live;
    rings.reserve(live.size());
    std::size_t at = 0;
    for (std::size_t k = 0; k < live.size(); ++k) {
        const auto [ctx, rec] = live[k];
        while (ring_ctx_[at] < ctx) ++at;
        // A ring's record and state are a few cache lines each, met once a sample and cold by
        // then: asked for a few rings ahead, they arrive while the rings before are worked on.
        constexpr std::size_t kAhead = 4;
        if (k + kAhead < live.size()) prefetch(live[k + kAhead].second);
        if (at + kAhead < ring_states_.size()) prefetch(&ring_states_[at + kAhead]);
        const auto index = static_cast<std::uint32_t>(rings.size());
        const RingDelta d = observe_ring(cx, ctx, *rec, ring_states_[at], rings.emplace_back());
        add_holder(cx.ix.holders, rec->pid, index);
        if (rings.back().sq_thread > 0)
            cx.ix.sq_rings.push_back({rings.back().sq_thread, index, d});
    }
    cx.ix.group_threads();
}

// One ring into rs; returns the interval's deltas, for its SQ thread.
Aggregator::RingDelta Aggregator::observe_ring(UpdateContext& cx, std::uint64_t ctx,
                                               const iou_ring_record& rec, RingState& st,
                                               RingSnapshot& rs) {
    renew_if_replaced(st, rec);
    if (!st.seen_before) {
        st.id = std::to_string(rec.pid) + ":" + std::to_string(rec.fd);
        st.born_ns = rec.born_ns;
        st.start_time_unix = mono_to_unix(cx.raw, st.born_ns);  // once: the gauge never jitters
    }
    RingDelta d;
    ring_counters(cx, ctx, rec, st, d, rs);
    if (rs.carried) {
        // The ring as its last read saw it, the deep tier's figures too: the maps hold what
        // is under its address now, which may be a ring born at that address and fd after the
        // drain, which the light walk passed over (docs/ARCHITECTURE.md, "Light walks").
        rs.has_sqthread_work = st.deep.has_sqthread_work;
        rs.sqthread_work_seconds = st.deep.sqthread_work_seconds;
        rs.sqthread_submit_seconds = st.deep.sqthread_submit_seconds;
        rs.sqthread_batches = st.deep.sqthread_batches;
        rs.iopoll = st.deep.iopoll;
    } else {
        const std::uint64_t sq_poll_ns = ring_iopoll(cx, ctx, st, rs);
        ring_deep_work(cx, ctx, rec, st, d, sq_poll_ns, rs);
        if (plain_ring(rec.setup_flags))  // may be carried
            st.deep = {rs.has_sqthread_work, rs.sqthread_work_seconds, rs.sqthread_submit_seconds,
                       rs.sqthread_batches, rs.iopoll};
    }
    st.prev_sqes = rs.sqes_total;
    st.prev_cqes = rs.cqes_total;
    st.seen_before = true;
    return d;
}

// Identity, SQ and CQ counters, backlog and rates; the interval's deltas go to d.
void Aggregator::ring_counters(const UpdateContext& cx, std::uint64_t ctx,
                               const iou_ring_record& rec, RingState& st, RingDelta& d,
                               RingSnapshot& rs) {
    rs.id = st.id;
    rs.start_time_seconds = st.start_time_unix;
    rs.ctx = ctx;
    rs.pid = rec.pid;
    rs.fd = rec.fd;
    if (!st.seen_before || std::memcmp(st.comm_raw, rec.comm, IOU_COMM_LEN) != 0) {
        std::memcpy(st.comm_raw, rec.comm, IOU_COMM_LEN);
        st.comm = comm_of(rec.comm);
    }
    rs.comm = st.comm;
    rs.cgroup = labels_of(rec.cgroup_id);
    rs.mode = ring_mode(rec.setup_flags);
    rs.setup_flags = rec.setup_flags;
    rs.sq_entries = rec.sq_entries;
    rs.cq_entries = rec.cq_entries;
    rs.sq_thread = (rec.caps & IOU_CAP_SQ_THREAD) ? rec.sq_tid : -1;
    rs.carried = cx.carried(&rec);
    rs.sqes_total = st.sqes.observe(rec.sq_head);
    rs.cqes_total = st.cqes.observe(rec.cq_tail);
    if (rec.caps & IOU_CAP_SQ_TAIL)
        rs.sq_backlog = static_cast<std::uint32_t>(rec.sq_tail - rec.sq_head);
    ++st.samples;
    st.samples_with_backlog += rs.sq_backlog > 0;
    st.backlog_sum += rs.sq_backlog;
    rs.samples = st.samples;
    rs.samples_with_backlog = st.samples_with_backlog;
    rs.backlog_sum = st.backlog_sum;
    if (st.seen_before) {
        d.sqes = rs.sqes_total - st.prev_sqes;
        d.cqes = rs.cqes_total - st.prev_cqes;
    }
    ring_rates(cx, st, rs);
}

// SQEs and CQEs per second since the walk before last read the ring: over the sample interval
// for a ring every walk reads, over the time since the last full walk for a plain ring light
// walks pass over. A carried record keeps the rates of the last one read.
void Aggregator::ring_rates(const UpdateContext& cx, RingState& st, RingSnapshot& rs) {
    if (rs.carried) {
        rs.sqe_rate = st.sqe_rate;
        rs.cqe_rate = st.cqe_rate;
        return;
    }
    if (st.seen_before && cx.raw.mono_ns > st.read_mono_ns) {
        const double dt = static_cast<double>(cx.raw.mono_ns - st.read_mono_ns) / 1e9;
        st.sqe_rate = static_cast<double>(rs.sqes_total - st.read_sqes) / dt;
        st.cqe_rate = static_cast<double>(rs.cqes_total - st.read_cqes) / dt;
    }
    st.read_mono_ns = cx.raw.mono_ns;
    st.read_sqes = rs.sqes_total;
    st.read_cqes = rs.cqes_total;
    rs.sqe_rate = st.sqe_rate;
    rs.cqe_rate = st.cqe_rate;
}

// The ring's io_do_iopoll figures per caller (deep tier); returns the SQ thread's polling time.
std::uint64_t Aggregator::ring_iopoll(UpdateContext& cx, std::uint64_t ctx, RingState& st,
                                      RingSnapshot& rs) {
    std::uint64_t sq_poll_ns = 0;
    for (const auto& [key, entry] : seek(cx.ix.polls, cx.polls_at, ctx)) {
        const std::uint32_t caller = entry->first.caller;
        const iou_iopoll_stats* p = &entry->second;
        IopollSnapshot io = iopoll_snapshot(caller, *p);
        if (caller == IOU_CALLER_SQ_THREAD) sq_poll_ns = p->ns;
        if (auto prev = st.prev_iopoll.find(caller);
            prev != st.prev_iopoll.end() && cx.interval > 0) {
            const auto dcalls = p->calls - std::min(p->calls, prev->second.calls);
            const auto dempty = p->empty - std::min(p->empty, prev->second.empty);
            const auto dcomp = p->completions - std::min(p->completions, prev->second.completions);
            io.calls_rate = dcalls / cx.interval;
            io.empty_ratio = dcalls ? static_cast<double>(dempty) / dcalls : 0;
            io.completions_per_call = dcalls ? static_cast<double>(dcomp) / dcalls : 0;
        }
        st.prev_iopoll[caller] = *p;
        rs.iopoll.push_back(std::move(io));
    }
    return sq_poll_ns;
}

// The SQ thread's work on this ring (deep tier) and the submit probe's coverage of its SQEs.
void Aggregator::ring_deep_work(UpdateContext& cx, std::uint64_t ctx, const iou_ring_record& rec,
                                RingState& st, RingDelta& d, std::uint64_t sq_poll_ns,
                                RingSnapshot& rs) {
    const auto found = seek(cx.ix.work, cx.work_at, ctx);
    const iou_ring_work* w = found.empty() ? nullptr : found.front().second;
    // From the record, read with sq_head: the map is read after the walk, and the SQEs
    // submitted in between would skew the baseline.
    const std::uint64_t probe_sqes = rec.probe_sqes;
    if (cx.raw.submit_probe && st.seen_before && (rec.setup_flags & IOU_SETUP_SQPOLL)) {
        cx.cov_probe += probe_sqes - std::min(probe_sqes, st.prev_probe_sqes);
        cx.cov_iter += d.sqes;
    }
    st.prev_probe_sqes = probe_sqes;
    const std::uint64_t deep_ns = (w ? w->submit_ns : 0) + sq_poll_ns;
    if (st.seen_before) d.deep_work_ns = deep_ns - std::min(deep_ns, st.prev_deep_work_ns);
    st.prev_deep_work_ns = deep_ns;
    if (w) {
        rs.has_sqthread_work = true;
        rs.sqthread_submit_seconds = w->submit_ns / 1e9;
        rs.sqthread_work_seconds = cx.raw.ring_turns ? w->turn_ns / 1e9 : deep_ns / 1e9;
        rs.sqthread_batches = w->batches;
    } else if (sq_poll_ns > 0) {
        rs.has_sqthread_work = true;
        rs.sqthread_work_seconds = sq_poll_ns / 1e9;
    }
}

}  // namespace iouscope
