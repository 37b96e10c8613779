#pragma once
// What one Aggregator::update reads from the raw sample, indexed once, and what its stages hand
// on (Aggregator::UpdateContext); and the readers of raw records the stages share, defined in
// model/aggregator.cpp. Internal to the aggregator's files (model/aggregator*.cpp).
#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/aggregator.hpp"

namespace iouscope {

// (pid, place) of the processes that hold rings, place an index into Snapshot::rings, each pid
// once at least where it repeats in a row (processes_of).
using Holders = std::vector<std::pair<std::uint32_t, std::size_t>>;

// An index of raw entries by key: ascending keys, and under one key the raw sample's order (the
// pointers into its vector ascend with it).
template <class K, class V>
using RawIndex = std::vector<std::pair<K, const V*>>;

// What one update reads from the raw sample, indexed once into vectors that the aggregator keeps
// from one sample to the next (their capacity, not their contents): a steady sample of 10,000
// rings allocates nothing here. Built by build(), in model/aggregator_index.cpp.
struct Aggregator::SampleIndex {
    // A ring can sit in several fd tables (fork, SCM_RIGHTS); the first holder walked names it.
    RawIndex<std::uint64_t, iou_ring_record> live;  // by ctx
    std::vector<std::uint64_t> births;              // ring_births' keys, ascending
    RawIndex<std::uint64_t, iou_ring_work> work;
    RawIndex<std::uint64_t, std::pair<iou_iopoll_key, iou_iopoll_stats>> polls;  // by ctx
    RawIndex<std::uint32_t, iou_sched_state> sched;
    RawIndex<std::uint32_t, iou_work_gaps> gaps;
    RawIndex<std::uint32_t, iou_sq_passes> passes;
    RawIndex<std::uint32_t, std::pair<iou_waker_key, iou_waker_val>> wakers;  // by sq_tid
    // From the ring stage: the SQ threads' rings (index into Snapshot::rings, and the ring's
    // deltas), grouped by thread in ascending tid, each group in the rings' order.
    struct SqRing {
        std::int32_t tid;
        std::uint32_t index;
        RingDelta d;
    };
    std::vector<SqRing> sq_rings;
    std::vector<std::pair<std::size_t, RingDelta>> members;
    struct ThreadGroup {
        std::int32_t tid;
        std::size_t begin, end;  // its rings in members
    };
    std::vector<ThreadGroup> threads;
    Holders holders;  // of the live rings, as the ring stage met them

    void build(const RawSample& raw);
    // Groups sq_rings into members and threads, after the ring stage.
    void group_threads();
    bool has_thread(std::int32_t tid) const;

private:
    // The keys of RawSample::rings and ::births in their order, and their positions by key,
    // kept for the next sample's (sort_positions in model/aggregator_index.cpp).
    std::vector<std::uint64_t> live_keys_, births_keys_;
    std::vector<std::uint32_t> live_order_, births_order_;
    std::vector<std::pair<std::uint64_t, std::uint32_t>> sort_buf_;
};

// What one update reads from the raw sample, indexed once, and what the ring stage hands to
// the thread stage.
struct Aggregator::UpdateContext {
    const RawSample& raw;
    SampleIndex& ix;
    double interval = 0;             // seconds since the previous sample, 0 on the first
    std::uint64_t prev_mono_ns = 0;  // the previous sample's instant, 0 on the first
    // The ring stage's places in the indexes by ctx: it reads them in ascending ctx.
    std::size_t work_at = 0, polls_at = 0;
    std::uint64_t cov_probe = 0, cov_iter = 0;  // this interval's SQEs, see ProbeCoverage

    UpdateContext(const RawSample& r, SampleIndex& x, double iv) : raw(r), ix(x), interval(iv) {
        ix.build(r);
    }
    // The live record of ctx, nullptr if the walk did not see it.
    const iou_ring_record* live(std::uint64_t ctx) const;
    // A record of raw.rings carried from an earlier walk rather than read by this one.
    bool carried(const iou_ring_record* r) const {
        return r >= raw.rings.data() + (raw.rings.size() - raw.carried);
    }
};

namespace aggregation {

// The entries of key in an index.
template <class K, class V>
std::span<const std::pair<K, const V*>> entries_of(const RawIndex<K, V>& ix, K key) {
    auto lo =
        std::lower_bound(ix.begin(), ix.end(), key, [](const auto& e, K k) { return e.first < k; });
    auto hi = lo;
    while (hi != ix.end() && hi->first == key) ++hi;
    return {lo, hi};
}

// The first entry of key in an index, nullptr if none.
template <class K, class V>
const V* first_of(const RawIndex<K, V>& ix, K key) {
    const auto e = entries_of(ix, key);
    return e.empty() ? nullptr : e.front().second;
}

// The entries of key, for a reader that asks for keys in ascending order: `at` moves forward.
template <class K, class V>
std::span<const std::pair<K, const V*>> seek(const RawIndex<K, V>& ix, std::size_t& at, K key) {
    while (at < ix.size() && ix[at].first < key) ++at;
    std::size_t end = at;
    while (end < ix.size() && ix[end].first == key) ++end;
    return {ix.data() + at, end - at};
}

// A BPF log2 histogram of nanoseconds (bucket i holds [2^i, 2^(i+1)) ns) as a Prometheus-style
// histogram in seconds.
LatencyHistogram latency_histogram(std::span<const std::uint64_t> log2_ns, std::uint64_t sum_ns);

// A comm from a record: up to its NUL or IOU_COMM_LEN.
std::string comm_of(const char (&c)[IOU_COMM_LEN]);

// A CLOCK_MONOTONIC time (a birth, a thread's start_time) in Unix time, through the sample's
// pair of clocks; the sample's own time when it is unknown (0) or later than the sample.
double mono_to_unix(const RawSample& raw, std::uint64_t mono_ns);

// io_do_iopoll counts added to a total.
void add_iopoll(iou_iopoll_stats& to, const iou_iopoll_stats& v);

// Adds a ring's (or a thread's) process to h unless h ends with it.
inline void add_holder(Holders& h, std::uint32_t pid, std::size_t place) {
    if (h.empty() || h.back().first != pid) h.emplace_back(pid, place);
}
// processes_of(snap) from the holders of its rings (which it extends with the threads' and
// sorts).
std::vector<ProcessSnapshot> processes_of(const Snapshot& snap, Holders& rings);

// Each ring's requests, requests in flight and CQ overflow, from raw.requests
// (model/aggregator_requests.cpp).
void attach_requests(const RawSample& raw, std::vector<RingSnapshot>& rings);

// Each process's io-wq workers (model/aggregator_iowq.cpp). floor holds, per process, the
// counters last reported, which no later sample undercuts: a worker exiting between the exit
// read and the worker walk is in neither for that sample.
// rings names each ring's process, for the requests in flight on io-wq beside the workers.
std::vector<IowqSnapshot> iowq_processes(const RequestSample& rq, const RingRecords& rings,
                                         std::map<IowqProcKey, IowqFloor>& floor);

// Idle and blocked time so far, counting a sleep still in progress up to the walk.
std::pair<std::uint64_t, std::uint64_t> asleep_totals(const iou_sched_state* ss,
                                                      std::uint64_t mono_ns);

}  // namespace aggregation

}  // namespace iouscope
