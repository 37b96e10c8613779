// The ring stage of Aggregator::update: each ring's identity, its SQ and CQ counters, backlog
// and rates, its io_do_iopoll figures and its SQ thread's deep-tier work on it, and the deltas it
// hands to its SQ thread (UpdateContext::by_thread).
#include <algorithm>
#include <string>

#include "model/aggregator_update.hpp"

namespace iouscope {

using namespace aggregation;

std::string ring_mode(std::uint32_t flags) {
    bool sq = flags & IOU_SETUP_SQPOLL, io = flags & IOU_SETUP_IOPOLL;
    if (sq && io) return "both";
    if (sq) return "sqpoll";
    if (io) return "iopoll";
    return "plain";
}

RingSnapshot Aggregator::observe_ring(UpdateContext& cx, std::uint64_t ctx,
                                      const iou_ring_record& rec, std::size_t index) {
    auto& st = rings_[ctx];
    if (!st.seen_before) {
        st.id = std::to_string(rec.pid) + ":" + std::to_string(rec.fd);
        st.born_ns = rec.born_ns;
        st.start_time_unix = mono_to_unix(cx.raw, st.born_ns);  // once: the gauge never jitters
    }
    RingDelta d;
    RingSnapshot rs = ring_counters(cx, ctx, rec, st, d);
    const std::uint64_t sq_poll_ns = ring_iopoll(cx, ctx, st, rs);
    ring_deep_work(cx, ctx, rec, st, d, sq_poll_ns, rs);
    st.prev_sqes = rs.sqes_total;
    st.prev_cqes = rs.cqes_total;
    st.seen_before = true;
    if (rs.sq_thread > 0) {
        cx.by_thread[rs.sq_thread].emplace_back(index, d);
        cx.thread_rec.emplace(rs.sq_thread, &rec);
    }
    return rs;
}

// Identity, SQ and CQ counters, backlog and rates; the interval's deltas go to d.
RingSnapshot Aggregator::ring_counters(const UpdateContext& cx, std::uint64_t ctx,
                                       const iou_ring_record& rec, RingState& st, RingDelta& d) {
    RingSnapshot rs;
    rs.id = st.id;
    rs.start_time_seconds = st.start_time_unix;
    rs.ctx = ctx;
    rs.pid = rec.pid;
    rs.fd = rec.fd;
    rs.comm = comm_of(rec.comm);
    rs.cgroup = cgroup_labels(cx.raw, rec.cgroup_id);
    rs.mode = ring_mode(rec.setup_flags);
    rs.setup_flags = rec.setup_flags;
    rs.sq_entries = rec.sq_entries;
    rs.sq_thread = (rec.caps & IOU_CAP_SQ_THREAD) ? rec.sq_tid : -1;
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
    if (cx.interval > 0) {
        rs.sqe_rate = d.sqes / cx.interval;
        rs.cqe_rate = d.cqes / cx.interval;
    }
    return rs;
}

// The ring's io_do_iopoll figures per caller (deep tier); returns the SQ thread's polling time.
std::uint64_t Aggregator::ring_iopoll(const UpdateContext& cx, std::uint64_t ctx, RingState& st,
                                      RingSnapshot& rs) {
    std::uint64_t sq_poll_ns = 0;
    const auto it = cx.polls.find(ctx);
    if (it == cx.polls.end()) return 0;
    for (const auto& [caller, p] : it->second) {
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
    const auto w = cx.work.find(ctx);
    // From the record, read with sq_head: the map is read after the walk, and the SQEs
    // submitted in between would skew the baseline.
    const std::uint64_t probe_sqes = rec.probe_sqes;
    if (cx.raw.submit_probe && st.seen_before && (rec.setup_flags & IOU_SETUP_SQPOLL)) {
        cx.cov_probe += probe_sqes - std::min(probe_sqes, st.prev_probe_sqes);
        cx.cov_iter += d.sqes;
    }
    st.prev_probe_sqes = probe_sqes;
    const std::uint64_t deep_ns = (w != cx.work.end() ? w->second->submit_ns : 0) + sq_poll_ns;
    if (st.seen_before) d.deep_work_ns = deep_ns - std::min(deep_ns, st.prev_deep_work_ns);
    st.prev_deep_work_ns = deep_ns;
    if (w != cx.work.end()) {
        rs.has_sqthread_work = true;
        rs.sqthread_submit_seconds = w->second->submit_ns / 1e9;
        rs.sqthread_work_seconds = cx.raw.ring_turns ? w->second->turn_ns / 1e9 : deep_ns / 1e9;
        rs.sqthread_batches = w->second->batches;
    } else if (sq_poll_ns > 0) {
        rs.has_sqthread_work = true;
        rs.sqthread_work_seconds = sq_poll_ns / 1e9;
    }
}

}  // namespace iouscope
