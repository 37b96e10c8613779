#pragma once
// What one Aggregator::update reads from the raw sample, indexed once, and what its stages hand
// on (Aggregator::UpdateContext); and the readers of raw records the stages share, defined in
// model/aggregator.cpp. Internal to the aggregator's files (model/aggregator*.cpp).
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/aggregator.hpp"

namespace iouscope {

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

namespace aggregation {

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

// Idle and blocked time so far, counting a sleep still in progress up to the walk.
std::pair<std::uint64_t, std::uint64_t> asleep_totals(const iou_sched_state* ss,
                                                      std::uint64_t mono_ns);

}  // namespace aggregation

}  // namespace iouscope
