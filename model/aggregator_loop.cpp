// The deep tier's view of an SQ thread's loop: the gaps between its SQEs (and the histogram's
// buckets, cut as the BPF program cuts them) and its loop passes.
#include <algorithm>
#include <cmath>
#include <iterator>

#include "iouscope/gap_bucket.h"
#include "model/aggregator_update.hpp"

namespace iouscope {

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

}  // namespace iouscope
