// Aggregator::update, the list of its stages (each in a model/aggregator_*.cpp of its concern),
// the sample's HZ, what it finishes the snapshot with, and the record readers the stages share.
#include "model/aggregator.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "model/aggregator_update.hpp"
#include "model/container.hpp"

namespace iouscope {

namespace aggregation {

namespace {

// Histogram buckets below 2^10 ns (~1 us) carry no information about wake latency, which is never
// that short, so exposition starts there and keeps the series count per thread at 25.
constexpr std::size_t kFirstLatencyBucket = 9;

}  // namespace

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

}  // namespace aggregation

using namespace aggregation;

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

namespace aggregation {

std::vector<ProcessSnapshot> processes_of(const Snapshot& snap, Holders& rings) {
    // A process is where its rings are held; an SQ thread's process that holds none (another
    // process's shared thread) is where that thread is. The first ring, then the first thread,
    // names each pid: (pid, place) pairs sorted keep the first place of each pid, rings' places
    // before threads'.
    for (std::size_t i = 0; i < snap.threads.size(); ++i)
        add_holder(rings, snap.threads[i].pid, snap.rings.size() + i);
    std::sort(rings.begin(), rings.end());
    std::vector<ProcessSnapshot> out;
    for (std::size_t k = 0; k < rings.size(); ++k) {
        if (k > 0 && rings[k].first == rings[k - 1].first) continue;
        const auto [pid, place] = rings[k];
        if (place < snap.rings.size()) {
            const auto& r = snap.rings[place];
            out.push_back(ProcessSnapshot{pid, r.comm, r.cgroup});
        } else {
            const auto& t = snap.threads[place - snap.rings.size()];
            out.push_back(ProcessSnapshot{pid, t.comm, t.cgroup});
        }
    }
    return out;
}

}  // namespace aggregation

std::vector<ProcessSnapshot> processes_of(const Snapshot& snap) {
    Holders holders;
    for (std::size_t i = 0; i < snap.rings.size(); ++i) add_holder(holders, snap.rings[i].pid, i);
    return processes_of(snap, holders);
}

Aggregator::Aggregator() : ix_(std::make_unique<SampleIndex>()) {}
Aggregator::~Aggregator() = default;
Aggregator::Aggregator(Aggregator&&) noexcept = default;
Aggregator& Aggregator::operator=(Aggregator&&) noexcept = default;

// The stages, in order: the sample's clocks and HZ; ring identity and lifecycle; each ring's
// counters and deep-tier work; each SQ thread's identity, CPU split, rates and shares; thread
// expiry and map cleanup; host-wide IOPOLL and device totals; coverage and global counters.
Snapshot Aggregator::update(const RawSample& raw) {
    Snapshot snap;
    snap.seq = ++seq_;
    snap.timestamp = raw.unix_time;
    snap.monotonic_seconds = static_cast<double>(raw.mono_ns) / 1e9;
    snap.interval_seconds =
        prev_mono_ns_ && raw.mono_ns > prev_mono_ns_ ? (raw.mono_ns - prev_mono_ns_) / 1e9 : 0;
    UpdateContext cx(raw, *ix_, snap.interval_seconds);
    cx.prev_mono_ns = prev_mono_ns_;
    prev_mono_ns_ = raw.mono_ns;
    cleanup_ = {};
    measure_hz(raw);
    sync_cgroups(raw);

    if (!raw.walk_complete) ++walks_incomplete_;
    walks_light_ += raw.light_walk;
    count_created(cx);
    const std::vector<std::uint64_t> gone = end_ring_lives(cx);
    observe_rings(cx, snap.rings);
    attach_requests(raw, snap.rings);
    snap.iowq_probe = raw.requests.iowq_probe;
    snap.iowq = aggregation::iowq_processes(raw.requests, raw.rings, iowq_floor_);
    snap.threads.reserve(cx.ix.threads.size());
    for (const auto& g : cx.ix.threads)
        snap.threads.push_back(observe_thread(
            cx, g.tid, Members(cx.ix.members).subspan(g.begin, g.end - g.begin), snap.rings));
    expire_threads(cx);

    // Host totals: rings retired so far plus every entry in the map now. Entries about to be
    // deleted move into retired_iopoll_ in plan_ring_cleanup, so nothing counts twice or goes.
    std::map<std::uint32_t, iou_iopoll_stats> host = retired_iopoll_;
    for (const auto& [k, v] : raw.iopoll) add_iopoll(host[k.caller], v);
    plan_ring_cleanup(cx, gone);
    plan_waker_cleanup(raw);
    for (const auto& [caller, v] : host) snap.iopoll_host.push_back(iopoll_snapshot(caller, v));

    for (const auto& [key, n] : raw.nvme) snap.devices.push_back(observe_device(cx, key, n));
    finish(cx, snap);
    return snap;
}

RawSample Aggregator::take_raw() {
    // A fresh sample with the spare's buffers moved in and emptied: every other field starts as
    // a new RawSample's does, whatever fields it gains.
    RawSample raw;
    const auto reuse = [](auto& to, auto& from) {
        to.swap(from);
        to.clear();
    };
    reuse(raw.rings, spare_.rings);
    reuse(raw.births, spare_.births);
    reuse(raw.sched, spare_.sched);
    reuse(raw.wakers, spare_.wakers);
    reuse(raw.created, spare_.created);
    reuse(raw.ring_work, spare_.ring_work);
    reuse(raw.iopoll, spare_.iopoll);
    reuse(raw.gaps, spare_.gaps);
    reuse(raw.passes, spare_.passes);
    spare_ = RawSample{};
    return raw;
}

void Aggregator::measure_hz(const RawSample& raw) {
    // The first record the walk read itself: a carried one's jiffies are an earlier walk's.
    if (hz_ != 0 || raw.rings.size() == raw.carried) return;
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
    snap.processes = processes_of(snap, cx.ix.holders);
    for (const auto& [m, n] : created_by_mode_) snap.rings_created_by_mode.emplace_back(m, n);
    for (const auto& [m, n] : short_lived_by_mode_)
        snap.rings_short_lived_by_mode.emplace_back(m, n);
    snap.map_overflows = {{"created_rings", raw.stats.created_dropped},
                          {"ring_births", raw.stats.births_dropped},
                          {"sched_state", raw.stats.sched_dropped},
                          {"wakers", raw.stats.wakers_dropped},
                          {"deep", raw.stats.deep_dropped},
                          {"inflight_calls", raw.stats.inflight_dropped},
                          {"req_stats", raw.requests.counters.keys_dropped},
                          {"req_inflight", raw.requests.counters.inflight_dropped},
                          {"ring_overflow", raw.requests.counters.overflow_dropped},
                          {"ring_enters", raw.requests.counters.enters_dropped},
                          {"iowq_exits", raw.requests.counters.iowq_dropped}};
    snap.requests_unmatched = raw.requests.counters.unmatched;
    snap.rings_replaced = rings_replaced_;
    snap.threads_replaced = threads_replaced_;
    snap.walks_incomplete = walks_incomplete_;
    snap.walks_light = walks_light_;
    snap.rings_carried = raw.carried;
    snap.hz = hz_;
    snap.idle_ns_supported = raw.kernel.idle_ns_supported;
    snap.gap_sampling = raw.gap_sampling;
}

}  // namespace iouscope
