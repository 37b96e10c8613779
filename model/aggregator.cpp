#include "model/aggregator.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "iouscope/gap_bucket.h"
#include "model/container.hpp"

namespace iouscope {

namespace {

// Histogram buckets below 2^10 ns (~1 us) carry no information about wake latency, which is never
// that short, so exposition starts there and keeps the series count per thread at 25.
constexpr std::size_t kFirstLatencyBucket = 9;

// A BPF log2 histogram of nanoseconds (bucket i holds [2^i, 2^(i+1)) ns) as a Prometheus-style
// histogram in seconds.
LatencyHistogram latency_histogram(std::span<const std::uint64_t> log2_ns, std::uint64_t sum_ns) {
    LatencyHistogram h;
    auto cum = log2_to_cumulative(log2_ns, kFirstLatencyBucket);
    for (double b : cum.upper_bounds) h.upper_bounds_s.push_back(b / 1e9);
    h.cumulative = std::move(cum.cumulative);
    h.count = cum.count;
    h.sum_s = static_cast<double>(sum_ns) / 1e9;
    return h;
}

std::string comm_of(const char (&c)[IOU_COMM_LEN]) {
    std::size_t n = 0;
    while (n < IOU_COMM_LEN && c[n]) ++n;
    return std::string(c, n);
}

double idle_seconds(const iou_ring_record& r, unsigned hz) {
    if (r.sq_idle_unit == IOU_IDLE_NS) return static_cast<double>(r.sq_thread_idle) / 1e9;
    if (hz == 0) return 0;  // not known yet
    return static_cast<double>(r.sq_thread_idle) / hz;
}

}  // namespace

unsigned snap_hz(double measured) {
    // Every HZ a Kconfig offers: kernel/Kconfig.hz (100, 250, 300, 1000) and the architectures'
    // own choices (alpha, arm, mips, sh). The closest neighbours, 250 and 256, are 2.4 % apart.
    static constexpr unsigned kHz[] = {24,  32,  48,  64,  100,  128,  200,
                                       250, 256, 300, 500, 1000, 1024, 1200};
    unsigned best = 0;
    double err = HUGE_VAL;
    for (unsigned hz : kHz) {
        const double e = std::abs(measured - hz) / hz;
        if (e < err) {
            err = e;
            best = hz;
        }
    }
    return err < 0.01 ? best : 0;
}

namespace {

// A CLOCK_MONOTONIC time (a birth, a thread's start_time) in Unix time, through the sample's
// pair of clocks; the sample's own time when it is unknown (0) or later than the sample.
double mono_to_unix(const RawSample& raw, std::uint64_t mono_ns) {
    return mono_ns && mono_ns <= raw.mono_ns
               ? raw.unix_time - static_cast<double>(raw.mono_ns - mono_ns) / 1e9
               : raw.unix_time;
}

void add_iopoll(iou_iopoll_stats& to, const iou_iopoll_stats& v) {
    to.calls += v.calls;
    to.empty += v.empty;
    to.completions += v.completions;
    to.ns += v.ns;
}

// Idle and blocked time so far, counting a sleep still in progress up to the walk.
std::pair<std::uint64_t, std::uint64_t> asleep_totals(const iou_sched_state* ss,
                                                      std::uint64_t mono_ns) {
    if (!ss) return {0, 0};
    std::uint64_t sleep_ns = ss->sleep_ns, block_ns = ss->block_ns;
    if (ss->sleep_start_ns && mono_ns > ss->sleep_start_ns)
        (ss->blocked ? block_ns : sleep_ns) += mono_ns - ss->sleep_start_ns;
    return {sleep_ns, block_ns};
}

WakerSnapshot waker_of(const std::pair<iou_waker_key, iou_waker_val>& w) {
    WakerSnapshot out{w.first.waker_pid, comm_of(w.second.comm), w.second.count, "task"};
    if (w.first.context == IOU_WAKER_IRQ) out.context = out.comm = "irq";
    return out;
}

}  // namespace

SpinModel spin_model(const iou_ring_record& r, unsigned hz) {
    if (r.sq_idle_unit == IOU_IDLE_NS) return {"ns", r.sq_thread_idle, true};
    if (hz == 0) return {"", 0, false};
    // The loop sleeps once time_after(jiffies, timeout): between idle and idle + 1 tick after
    // the moment the timeout was set, half a tick over on average.
    const std::uint64_t tick_ns = 1'000'000'000ull / hz;
    const std::uint64_t per_sleep = r.sq_thread_idle * tick_ns + tick_ns / 2;
    return {(r.caps & IOU_CAP_IDLE_IN_SQD) ? "after_last_work" : "after_wakeup", per_sleep, true};
}

double gap_bucket_lower_ns(std::size_t i) {
    if (i == 0) return 0;
    const std::size_t m = 6 + (i - 1) / 4, sub = (i - 1) % 4;
    return std::ldexp(1.0, static_cast<int>(m)) + sub * std::ldexp(1.0, static_cast<int>(m) - 2);
}

std::size_t gap_bucket_index(std::uint64_t v) {
    // The BPF program's own function (include/iouscope/gap_bucket.h), clamped as it clamps.
    return static_cast<std::size_t>(std::min<__u64>(iou_gap_bucket(v), IOU_GAP_BUCKETS - 1));
}

double gap_bucket_upper_ns(std::size_t i) {
    if (i + 1 >= IOU_GAP_BUCKETS) return HUGE_VAL;
    return gap_bucket_lower_ns(i + 1);
}

const char* to_string(WorkSource s) {
    switch (s) {
        case WorkSource::kernel:
            return "kernel";
        case WorkSource::loop_passes:
            return "loop_passes";
        case WorkSource::submit_and_poll:
            return "submit_and_poll";
        case WorkSource::estimate:
            break;
    }
    return "estimate";
}

std::string ring_mode(std::uint32_t flags) {
    bool sq = flags & IOU_SETUP_SQPOLL, io = flags & IOU_SETUP_IOPOLL;
    if (sq && io) return "both";
    if (sq) return "sqpoll";
    if (io) return "iopoll";
    return "plain";
}

// What one update reads from the raw sample, indexed once, and what the ring stage hands to
// the thread stage.
struct Aggregator::UpdateContext {
    const RawSample& raw;
    double interval = 0;             // seconds since the previous sample, 0 on the first
    std::uint64_t prev_mono_ns = 0;  // the previous sample's instant, 0 on the first
    // A ring can sit in several fd tables (fork, SCM_RIGHTS); the first holder walked names it.
    std::map<std::uint64_t, const iou_ring_record*> live;
    std::map<std::uint64_t, const iou_ring_work*> work;
    std::map<std::uint64_t, std::vector<std::pair<std::uint32_t, const iou_iopoll_stats*>>> polls;
    std::map<std::uint32_t, const iou_sched_state*> sched;
    std::map<std::uint32_t, const iou_work_gaps*> gaps;
    std::map<std::uint32_t, const iou_sq_passes*> passes;
    std::map<std::uint32_t, std::vector<const std::pair<iou_waker_key, iou_waker_val>*>> wakers;
    // From the ring stage: each SQ thread's rings (index into Snapshot::rings, and the ring's
    // deltas) and one record that carries the thread's fields.
    std::map<std::int32_t, std::vector<std::pair<std::size_t, RingDelta>>> by_thread;
    std::map<std::int32_t, const iou_ring_record*> thread_rec;
    std::uint64_t cov_probe = 0, cov_iter = 0;  // this interval's SQEs, see ProbeCoverage

    UpdateContext(const RawSample& r, double iv) : raw(r), interval(iv) {
        for (const auto& x : r.rings) live.emplace(x.ctx, &x);
        for (const auto& [ctx, w] : r.ring_work) work.emplace(ctx, &w);
        for (const auto& [k, v] : r.iopoll) polls[k.ctx].emplace_back(k.caller, &v);
        for (const auto& [tid, x] : r.sched) sched.emplace(tid, &x);
        for (const auto& [tid, g] : r.gaps) gaps.emplace(tid, &g);
        for (const auto& [tid, x] : r.passes) passes.emplace(tid, &x);
        for (const auto& w : r.wakers) wakers[w.first.sq_tid].push_back(&w);
    }
};

// The stages, in order: the sample's clocks and HZ; ring identity and lifecycle; each ring's
// counters and deep-tier work; each SQ thread's identity, CPU split, rates and shares; thread
// expiry and map cleanup; host-wide IOPOLL and device totals; coverage and global counters.
CgroupLabels cgroup_labels(const RawSample& raw, std::uint64_t id) {
    CgroupLabels l;
    const auto it = raw.cgroup_paths.find(id);
    if (it == raw.cgroup_paths.end()) return l;
    l.cgroup = it->second;
    const ContainerIdentity c = container_of_cgroup(l.cgroup);
    l.container_id = c.container_id;
    l.pod_uid = c.pod_uid;
    return l;
}

std::vector<ProcessSnapshot> processes_of(const Snapshot& snap) {
    // A process is where its rings are held; an SQ thread's process that holds none (another
    // process's shared thread) is where that thread is.
    std::map<std::uint32_t, ProcessSnapshot> by_pid;
    for (const auto& r : snap.rings)
        by_pid.try_emplace(r.pid, ProcessSnapshot{r.pid, r.comm, r.cgroup});
    for (const auto& t : snap.threads)
        by_pid.try_emplace(t.pid, ProcessSnapshot{t.pid, t.comm, t.cgroup});
    std::vector<ProcessSnapshot> out;
    out.reserve(by_pid.size());
    for (auto& [pid, p] : by_pid) out.push_back(std::move(p));
    return out;
}

Snapshot Aggregator::update(const RawSample& raw) {
    Snapshot snap;
    snap.seq = ++seq_;
    snap.timestamp = raw.unix_time;
    snap.monotonic_seconds = static_cast<double>(raw.mono_ns) / 1e9;
    snap.interval_seconds =
        prev_mono_ns_ && raw.mono_ns > prev_mono_ns_ ? (raw.mono_ns - prev_mono_ns_) / 1e9 : 0;
    UpdateContext cx(raw, snap.interval_seconds);
    cx.prev_mono_ns = prev_mono_ns_;
    prev_mono_ns_ = raw.mono_ns;
    cleanup_ = {};
    measure_hz(raw);

    if (!raw.walk_complete) ++walks_incomplete_;
    count_created(raw, cx.live);
    const std::vector<std::uint64_t> gone = end_ring_lives(raw, cx.live);
    for (const auto& [ctx, rec] : cx.live)
        snap.rings.push_back(observe_ring(cx, ctx, *rec, snap.rings.size()));
    for (auto& [tid, members] : cx.by_thread)
        snap.threads.push_back(observe_thread(cx, tid, members, snap.rings));
    expire_threads(cx);

    // Host totals: rings retired so far plus every entry in the map now. Entries about to be
    // deleted move into retired_iopoll_ in plan_ring_cleanup, so nothing counts twice or goes.
    std::map<std::uint32_t, iou_iopoll_stats> host = retired_iopoll_;
    for (const auto& [k, v] : raw.iopoll) add_iopoll(host[k.caller], v);
    plan_ring_cleanup(raw, cx.live, gone);
    plan_waker_cleanup(raw);
    for (const auto& [caller, v] : host) snap.iopoll_host.push_back(iopoll_snapshot(caller, v));

    for (const auto& [key, n] : raw.nvme) snap.devices.push_back(observe_device(cx, key, n));
    finish(cx, snap);
    return snap;
}

void Aggregator::measure_hz(const RawSample& raw) {
    if (hz_ != 0 || raw.rings.empty()) return;
    // At least half a second apart, so one jiffy of rounding is < 1% at HZ=250.
    const auto j = raw.rings.front().jiffies;
    if (!hz_mono_ns_) {
        hz_jiffies_ = j;
        hz_mono_ns_ = raw.mono_ns;
    } else if (raw.mono_ns - hz_mono_ns_ >= 500'000'000 && j > hz_jiffies_) {
        // Not close enough to any HZ (a late walk): the window grows until it is.
        hz_ = snap_hz((j - hz_jiffies_) / ((raw.mono_ns - hz_mono_ns_) / 1e9));
    }
}

// --- Ring stage ----------------------------------------------------------------------------

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

// --- Thread stage --------------------------------------------------------------------------

// What a thread's rings did in the interval, summed.
ThreadSnapshot Aggregator::observe_thread(
    UpdateContext& cx, std::int32_t tid,
    const std::vector<std::pair<std::size_t, RingDelta>>& members,
    std::vector<RingSnapshot>& rings) {
    const iou_ring_record& rec = *cx.thread_rec.at(tid);
    ThreadState& st = thread_identity(cx.raw, tid, rec, rings[members.front().first]);
    // BPF entries under this tid count only if they are this thread's (records.h).
    const auto owned = [&](const auto& index) -> decltype(index.begin()->second) {
        auto it = index.find(static_cast<std::uint32_t>(tid));
        return it != index.end() && it->second->owner_start_ns == rec.sq_start_ns ? it->second
                                                                                  : nullptr;
    };
    const iou_sched_state* ss = owned(cx.sched);
    const iou_sq_passes* own_passes = owned(cx.passes);
    MemberTotals m;
    for (const auto& [idx, d] : members) {
        m.sqes += d.sqes;
        m.cqes += d.cqes;
        m.deep_work_ns += d.deep_work_ns;
        m.sqes_total += rings[idx].sqes_total;
        m.pinned = m.pinned || (rings[idx].setup_flags & IOU_SETUP_SQ_AFF);
    }

    ThreadSnapshot ts = thread_basics(tid, rec, st, members.size());
    ts.cgroup = cgroup_labels(cx.raw, rec.sq_cgroup_id);
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
    if (const iou_work_gaps* g = owned(cx.gaps)) thread_gaps(*g, cx.raw, ts);
    if (own_passes) thread_passes(*own_passes, cx.interval, st, ts);
    for (const auto* w : cx.wakers[static_cast<std::uint32_t>(tid)])
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

// The thread's CPU split into work and spin, from the best source the kernel and the attached
// probes offer (ts.work_source), with the estimate kept beside it (ts.work_by_source_seconds).
void Aggregator::split_thread_cpu(const RawSample& raw, const iou_ring_record& rec, ThreadState& st,
                                  const MemberTotals& m, const iou_sq_passes* passes,
                                  std::uint64_t cpu_ns, ThreadSnapshot& ts) {
    const std::uint64_t pass_work = passes ? passes->work_ns : 0;
    const std::uint64_t dpass = pass_work - std::min(pass_work, st.prev_pass_work_ns);
    st.prev_pass_work_ns = pass_work;
    const bool kernel_work = raw.kernel.work_time_per_thread && (rec.caps & IOU_CAP_WORK_TIME) != 0;
    // The loop passes are timed on the monotonic clock; the kernel's work_time is built from
    // tick-sampled cputime, which short passes fall between (a quarter to all of the
    // passes' time on the same loads in the guests, docs/BENCHMARKS.md).
    ts.work_source = raw.ring_turns     ? WorkSource::loop_passes
                     : kernel_work      ? WorkSource::kernel
                     : raw.submit_probe ? WorkSource::submit_and_poll
                                        : WorkSource::estimate;
    const SpinModel model = spin_model(rec, hz_);
    ts.spin_model = model.name;
    // A jiffies idle setting means nothing until HZ is known: splitting before would book
    // the thread's whole history as work (an idle of 0) on the first sample.
    ts.split_known = ts.work_source == WorkSource::kernel || model.known;
    const std::uint64_t dcpu = cpu_ns - std::min(cpu_ns, st.prev_cpu_ns);
    const CpuSplit estimate = advance_estimate(st, model, m, cpu_ns, dcpu, ts.sleeps);
    const std::uint64_t work_time_ns = rec.work_time_us * 1000;
    if (ts.work_source == WorkSource::kernel) {
        kernel_split(st, cpu_ns, work_time_ns);
    } else if (!ts.split_known) {
        // Left at zero; the first sample with HZ splits the whole history.
    } else if (!st.split_started) {
        // The history is the estimate's: the deep tier only measures from now on.
        st.work_ns = st.estimate_work_ns;
        st.spin_ns = cpu_ns - std::min(cpu_ns, st.work_ns);
        st.split_started = true;
    } else {
        // The deep tier measures the interval's work; the estimate only infers it.
        CpuSplit split = estimate;
        if (ts.work_source == WorkSource::loop_passes)
            split = split_with_work_time(dcpu, dpass);
        else if (ts.work_source == WorkSource::submit_and_poll)
            split = split_with_work_time(dcpu, m.deep_work_ns);
        st.work_ns += split.work_ns;
        st.spin_ns += split.spin_ns;
    }
    st.prev_kernel = ts.work_source == WorkSource::kernel;
    st.prev_work_time_ns = work_time_ns;
    st.submit_poll_work_ns += m.deep_work_ns;
    if (kernel_work)
        ts.work_by_source_seconds.emplace_back(
            WorkSource::kernel, split_with_work_time(cpu_ns, work_time_ns).work_ns / 1e9);
    if (raw.ring_turns)
        ts.work_by_source_seconds.emplace_back(WorkSource::loop_passes, pass_work / 1e9);
    if (raw.submit_probe)
        ts.work_by_source_seconds.emplace_back(WorkSource::submit_and_poll,
                                               st.submit_poll_work_ns / 1e9);
    if (ts.split_known)
        ts.work_by_source_seconds.emplace_back(WorkSource::estimate, st.estimate_work_ns / 1e9);
}

// Work from the kernel's work_time. Over a thread's whole life when the split starts with it;
// from the switch on when another source split the history first (see kernel_offset_ns).
void Aggregator::kernel_split(ThreadState& st, std::uint64_t cpu_ns, std::uint64_t work_time_ns) {
    if (st.split_started && !st.prev_kernel)
        st.kernel_offset_ns =
            static_cast<std::int64_t>(st.work_ns) - static_cast<std::int64_t>(st.prev_work_time_ns);
    const std::int64_t target = static_cast<std::int64_t>(work_time_ns) + st.kernel_offset_ns;
    const auto work = static_cast<std::uint64_t>(std::max<std::int64_t>(0, target));
    st.work_ns = std::max(st.work_ns, std::min(work, cpu_ns));
    st.spin_ns = std::max(st.spin_ns, cpu_ns - std::min(cpu_ns, st.work_ns));
    st.split_started = true;
}

// The estimate runs whichever source rules, so that all can be shown side by side. Returns the
// interval's share of it (the whole history on the first sample it can run).
CpuSplit Aggregator::advance_estimate(ThreadState& st, const SpinModel& model,
                                      const MemberTotals& m, std::uint64_t cpu_ns,
                                      std::uint64_t dcpu, std::uint64_t sleeps) {
    CpuSplit estimate{};
    if (model.known && !st.estimate_started) {
        // The CPU the thread used before the estimate started, with its idle sleeps so far
        // (its voluntary switches, without the tracepoints).
        estimate = estimate_split(cpu_ns, sleeps, model.spin_per_sleep_ns, m.sqes_total > 0);
        st.estimate_started = true;
    } else if (model.known) {
        const std::uint64_t dsleeps = sleeps - std::min(sleeps, st.prev_sleeps);
        estimate = estimate_split(dcpu, dsleeps, model.spin_per_sleep_ns, m.sqes + m.cqes > 0);
    }
    st.estimate_work_ns += estimate.work_ns;
    return estimate;
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

// Each ring's share of the thread's SQEs, Jain's fairness among the rings that wanted service
// in the interval (those that got some, and those left with a backlog), and the deep tier's
// per-ring work summed.
void Aggregator::shares_and_fairness(const std::vector<std::pair<std::size_t, RingDelta>>& members,
                                     std::uint64_t dsqes, std::vector<RingSnapshot>& rings,
                                     ThreadSnapshot& ts) {
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

void Aggregator::thread_gaps(const iou_work_gaps& g, const RawSample& raw, ThreadSnapshot& ts) {
    const std::uint64_t mono_ns = raw.mono_ns;
    ts.has_gaps = true;
    ts.gaps.count.assign(std::begin(g.count), std::end(g.count));
    ts.gaps.sum_ns.assign(std::begin(g.sum_ns), std::end(g.sum_ns));
    ts.gaps.sleep_spins = g.sleep_spins;
    ts.gaps.sleep_spin_seconds = g.sleep_spin_ns / 1e9;
    // Same clock: bpf_ktime_get_ns() is CLOCK_MONOTONIC.
    if (g.last_work_ns && mono_ns >= g.last_work_ns)
        ts.gaps.open_gap_seconds = (mono_ns - g.last_work_ns) / 1e9;
    if (raw.gap_sampling) ts.gaps.recorded_seconds = raw.gap_sampling->recorded_seconds;
}

void Aggregator::thread_passes(const iou_sq_passes& p, double interval, ThreadState& st,
                               ThreadSnapshot& ts) {
    ts.has_passes = true;
    ts.loop_passes = p.passes;
    ts.busy_passes = std::min<std::uint64_t>(p.busy_passes, p.passes);
    ts.pass_work_seconds = static_cast<double>(p.work_ns) / 1e9;
    ts.task_work_seconds = static_cast<double>(p.task_work_ns) / 1e9;
    const std::uint64_t dpasses =
        ts.loop_passes - std::min<std::uint64_t>(ts.loop_passes, st.prev_passes);
    const std::uint64_t dbusy = ts.busy_passes - std::min(ts.busy_passes, st.prev_busy_passes);
    if (st.seen_before && interval > 0) ts.pass_rate = static_cast<double>(dpasses) / interval;
    if (st.seen_before && dpasses > 0)
        ts.empty_pass_ratio =
            static_cast<double>(dpasses - std::min(dpasses, dbusy)) / static_cast<double>(dpasses);
    st.prev_passes = ts.loop_passes;
    st.prev_busy_passes = ts.busy_passes;
}

// Threads with BPF state but no ring any more, and threads that vanished, expire after a few
// samples: long enough to ride out a ring that is being set up, short enough to keep the maps
// bounded under churn.
void Aggregator::expire_threads(const UpdateContext& cx) {
    for (const auto& [tid, s] : cx.raw.sched) threads_.try_emplace(tid);
    for (const auto& [tid, g] : cx.raw.gaps) threads_.try_emplace(tid);
    for (const auto& [tid, p] : cx.raw.passes) threads_.try_emplace(tid);
    for (auto it = threads_.begin(); it != threads_.end();) {
        if (cx.by_thread.count(static_cast<std::int32_t>(it->first)) || !cx.raw.walk_complete ||
            ++it->second.missing < kExpireAfter) {
            ++it;
            continue;
        }
        cleanup_.threads.push_back(it->first);
        it = threads_.erase(it);
    }
}

// --- Host-wide stages ----------------------------------------------------------------------

IopollSnapshot Aggregator::iopoll_snapshot(std::uint32_t caller, const iou_iopoll_stats& v) {
    IopollSnapshot io;
    io.caller = caller == IOU_CALLER_SQ_THREAD ? "sq_thread" : "app";
    io.calls = v.calls;
    io.empty = v.empty;
    io.completions = v.completions;
    io.seconds = v.ns / 1e9;
    return io;
}

DeviceSnapshot Aggregator::observe_device(const UpdateContext& cx, const iou_dev_key& key,
                                          const iou_nvme_stats& n) {
    DeviceSnapshot d;
    d.name = std::string(key.disk, strnlen(key.disk, sizeof key.disk));
    if (d.name.empty()) d.name = "unknown";
    d.polled = n.polled;
    d.irq = n.irq;
    d.polled_intent_irq = n.polled_intent_irq;
    d.polls = n.polls;
    std::vector<std::uint64_t> hist(std::begin(n.lat_hist), std::end(n.lat_hist));
    d.latency = latency_histogram(hist, n.lat_sum_ns);
    if (cx.raw.cmd_done) {
        d.has_cqes = true;
        d.cqes = n.cqes;
        const std::vector<std::uint64_t> delay(std::begin(n.cqe_delay_hist),
                                               std::end(n.cqe_delay_hist));
        d.cqe_delay = latency_histogram(delay, n.cqe_delay_sum_ns);
    }
    auto& st = devices_[d.name];
    std::vector<std::uint64_t> delta = hist;
    const std::uint64_t now = cx.raw.mono_ns;
    if (st.seen_before) {
        for (std::size_t i = 0; i < delta.size(); ++i)
            delta[i] -= std::min<std::uint64_t>(delta[i], st.prev.lat_hist[i]);
        const auto dpolled = n.polled - std::min(n.polled, st.prev.polled);
        const auto dirq = n.irq - std::min(n.irq, st.prev.irq);
        const auto dpolls = n.polls - std::min(n.polls, st.prev.polls);
        if (cx.interval > 0) d.completions_rate = (dpolled + dirq) / cx.interval;
        if (dpolled + dirq) d.polled_ratio = static_cast<double>(dpolled) / (dpolled + dirq);
        if (dpolled) d.polls_per_completion = static_cast<double>(dpolls) / dpolled;
        if (n.polled_intent_irq > st.prev.polled_intent_irq) st.last_intent_irq_ns = now;
    } else if (n.polled_intent_irq > 0) {
        st.last_intent_irq_ns = now;
    }
    if (auto p = log2_quantile(delta, 0.5)) d.latency_p50_seconds = *p / 1e9;
    if (auto p = log2_quantile(delta, 0.99)) d.latency_p99_seconds = *p / 1e9;
    d.iopoll_without_poll_queues =
        st.last_intent_irq_ns && now - st.last_intent_irq_ns <= kPollQueueFlagHoldNs;
    st.prev = n;
    st.seen_before = true;
    return d;
}

// The submit probe's coverage, the cumulative ring and map counters, HZ.
void Aggregator::finish(const UpdateContext& cx, Snapshot& snap) {
    const RawSample& raw = cx.raw;
    if (raw.submit_probe) {
        auto& c = submit_coverage_;
        c.probe_events += cx.cov_probe;
        c.iterator_events += cx.cov_iter;
        c.ratio = cx.cov_iter >= ProbeCoverage::kMinEvents
                      ? static_cast<double>(cx.cov_probe) / static_cast<double>(cx.cov_iter)
                      : -1;
        snap.coverage.push_back(c);
    }
    snap.processes = processes_of(snap);
    for (const auto& [m, n] : created_by_mode_) snap.rings_created_by_mode.emplace_back(m, n);
    for (const auto& [m, n] : short_lived_by_mode_)
        snap.rings_short_lived_by_mode.emplace_back(m, n);
    snap.map_overflows = {{"created_rings", raw.stats.created_dropped},
                          {"ring_births", raw.stats.births_dropped},
                          {"sched_state", raw.stats.sched_dropped},
                          {"wakers", raw.stats.wakers_dropped},
                          {"deep", raw.stats.deep_dropped},
                          {"inflight_calls", raw.stats.inflight_dropped}};
    snap.rings_replaced = rings_replaced_;
    snap.threads_replaced = threads_replaced_;
    snap.walks_incomplete = walks_incomplete_;
    snap.hz = hz_;
    snap.idle_ns_supported = raw.kernel.idle_ns_supported;
    snap.gap_sampling = raw.gap_sampling;
}

void Aggregator::count_created(const RawSample& raw,
                               const std::map<std::uint64_t, const iou_ring_record*>& live) {
    // A ring announced by io_uring_create was walked if a walk saw its ctx with its birth time.
    for (const auto& c : raw.created) {
        auto mode = ring_mode(c.setup_flags);
        ++created_by_mode_[mode];
        const auto l = live.find(c.ctx);
        const auto known = rings_.find(c.ctx);
        const bool walked = (l != live.end() && l->second->born_ns == c.ts_ns) ||
                            (known != rings_.end() && known->second.born_ns == c.ts_ns);
        if (!walked && raw.walk_complete) ++short_lived_by_mode_[mode];
    }
}

std::vector<std::uint64_t> Aggregator::end_ring_lives(
    const RawSample& raw, const std::map<std::uint64_t, const iou_ring_record*>& live) {
    // Rings that closed, and rings whose address a new ring took: their state goes, and the new
    // ring starts from its own counts (a counter reset, as Prometheus expects), never from the
    // old ring's. Returns the closed ones.
    std::vector<std::uint64_t> gone;
    for (auto it = rings_.begin(); it != rings_.end();) {
        const auto l = live.find(it->first);
        const bool closed = l == live.end();
        if ((closed && !raw.walk_complete) || (!closed && !replaced_by(it->second, *l->second))) {
            ++it;
            continue;
        }
        if (closed) {
            gone.push_back(it->first);
        } else {
            // The BPF side dropped the old ring's deep entries when the new one was created;
            // what it last showed of them stays in the host totals.
            retire_iopoll(it->second);
            ++rings_replaced_;
        }
        it = rings_.erase(it);
    }
    return gone;
}

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

bool Aggregator::replaced_by(const RingState& st, const iou_ring_record& rec) const {
    if (!st.seen_before) return false;
    return st.born_ns != rec.born_ns || !st.sqes.continues(rec.sq_head) ||
           !st.cqes.continues(rec.cq_tail);
}

void Aggregator::retire_iopoll(const RingState& st) {
    for (const auto& [caller, v] : st.prev_iopoll) add_iopoll(retired_iopoll_[caller], v);
}

void Aggregator::plan_ring_cleanup(const RawSample& raw,
                                   const std::map<std::uint64_t, const iou_ring_record*>& live,
                                   const std::vector<std::uint64_t>& gone) {
    if (!raw.walk_complete) return;  // an entry's owner may be among the rings not reached
    std::set<std::uint64_t> orphans;
    const auto consider = [&](std::uint64_t ctx) {
        if (!live.count(ctx)) orphans.insert(ctx);
    };
    for (const auto& [ctx, born] : raw.births) consider(ctx);
    for (const auto& [ctx, w] : raw.ring_work) consider(ctx);
    for (const auto& [k, v] : raw.iopoll) consider(k.ctx);
    // Closed rings go now; keys no walk has seen go when the next walk misses them too, since
    // a ring created just after this walk has entries but no record yet.
    std::set<std::uint64_t> doomed(gone.begin(), gone.end());
    std::set<std::uint64_t> pending;
    for (auto ctx : orphans) (orphan_rings_.count(ctx) ? doomed : pending).insert(ctx);
    orphan_rings_ = std::move(pending);
    // Their final io_do_iopoll counts are in this sample's read: they join the retired totals.
    for (const auto& [k, v] : raw.iopoll)
        if (doomed.count(k.ctx)) add_iopoll(retired_iopoll_[k.caller], v);
    cleanup_.rings.assign(doomed.begin(), doomed.end());
}

void Aggregator::plan_waker_cleanup(const RawSample& raw) {
    if (!raw.walk_complete) return;
    const std::set<std::uint32_t> expired(cleanup_.threads.begin(), cleanup_.threads.end());
    std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> orphans;
    for (const auto& [k, v] : raw.wakers) {
        const auto t = threads_.find(k.sq_tid);
        const bool stale =
            t != threads_.end() && t->second.start_ns && v.sq_start_ns != t->second.start_ns;
        if (expired.count(k.sq_tid) || stale) {
            cleanup_.wakers.push_back(k);
        } else if (t == threads_.end()) {
            const std::tuple key{k.sq_tid, k.waker_pid, k.context};
            if (orphan_wakers_.count(key))
                cleanup_.wakers.push_back(k);
            else
                orphans.insert(key);
        }
    }
    orphan_wakers_ = std::move(orphans);
}

}  // namespace iouscope
