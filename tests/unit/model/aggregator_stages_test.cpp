// Stages of Aggregator::update() on their own, with hand-made inputs: the ones that take all
// they use as arguments. update() as a whole is tested in aggregator_test.cpp.
#include <gtest/gtest.h>

#include "model/aggregator.hpp"

namespace iouscope {

// The unit tests' door to the private stages (a friend of Aggregator).
class AggregatorStages {
public:
    using RingDelta = Aggregator::RingDelta;
    using ThreadState = Aggregator::ThreadState;
    using Members = std::vector<std::pair<std::size_t, RingDelta>>;
    static void shares_and_fairness(const Members& m, std::uint64_t dsqes,
                                    std::vector<RingSnapshot>& rings, ThreadSnapshot& ts) {
        Aggregator::shares_and_fairness(m, dsqes, rings, ts);
    }
    static void thread_gaps(const iou_work_gaps& g, std::uint64_t mono_ns, ThreadSnapshot& ts) {
        RawSample raw;
        raw.mono_ns = mono_ns;
        Aggregator::thread_gaps(g, raw, ts);
    }
    static void thread_passes(const iou_sq_passes& p, double interval, ThreadState& st,
                              ThreadSnapshot& ts) {
        Aggregator::thread_passes(p, interval, st, ts);
    }
    static void thread_wake_latency(const iou_sched_state& ss, ThreadState& st,
                                    ThreadSnapshot& ts) {
        Aggregator::thread_wake_latency(ss, st, ts);
    }
};

namespace {

using S = AggregatorStages;

TEST(AggregatorStages, SharesAndFairnessCountRingsThatWantedService) {
    std::vector<RingSnapshot> rings(4);
    rings[2].sq_backlog = 5;  // got nothing, but had SQEs waiting: it wanted service
    rings[0].has_sqthread_work = true;
    rings[0].sqthread_work_seconds = 0.25;
    rings[1].has_sqthread_work = true;
    rings[1].sqthread_work_seconds = 0.5;
    // Ring 3 neither got SQEs nor waited: idle, out of the fairness.
    const S::Members m = {{0, {300, 300, 0}}, {1, {100, 100, 0}}, {2, {0, 0, 0}}, {3, {0, 0, 0}}};
    ThreadSnapshot ts;
    S::shares_and_fairness(m, 400, rings, ts);
    EXPECT_DOUBLE_EQ(rings[0].sqthread_share, 0.75);
    EXPECT_DOUBLE_EQ(rings[1].sqthread_share, 0.25);
    EXPECT_DOUBLE_EQ(rings[2].sqthread_share, 0);
    // Jain's index over 300, 100, 0: 400^2 / (3 * (300^2 + 100^2)).
    EXPECT_NEAR(ts.fairness, 160000.0 / 300000.0, 1e-12);
    EXPECT_DOUBLE_EQ(ts.rings_work_seconds, 0.75);
}

TEST(AggregatorStages, GapsCarryTheHistogramAndTheGapStillOpen) {
    iou_work_gaps g{};
    g.count[3] = 7;
    g.sum_ns[3] = 700;
    g.sleep_spins = 2;
    g.sleep_spin_ns = 3'000'000'000;
    g.last_work_ns = 10'000'000'000;
    ThreadSnapshot ts;
    S::thread_gaps(g, 12'500'000'000, ts);
    EXPECT_TRUE(ts.has_gaps);
    ASSERT_EQ(ts.gaps.count.size(), static_cast<std::size_t>(IOU_GAP_BUCKETS));
    EXPECT_EQ(ts.gaps.count[3], 7u);
    EXPECT_EQ(ts.gaps.sum_ns[3], 700u);
    EXPECT_DOUBLE_EQ(ts.gaps.sleep_spin_seconds, 3.0);
    EXPECT_DOUBLE_EQ(ts.gaps.open_gap_seconds, 2.5);
    // A last SQE after the sample's instant (read later in the same sample): no open gap known.
    ThreadSnapshot later;
    S::thread_gaps(g, 9'000'000'000, later);
    EXPECT_LT(later.gaps.open_gap_seconds, 0);
}

TEST(AggregatorStages, PassRatesNeedAPreviousSample) {
    S::ThreadState st;
    iou_sq_passes p{};
    p.passes = 1000;
    p.busy_passes = 250;
    ThreadSnapshot first;
    S::thread_passes(p, 1.0, st, first);
    EXPECT_EQ(first.loop_passes, 1000u);
    EXPECT_DOUBLE_EQ(first.pass_rate, 0);  // no interval yet
    st.seen_before = true;
    p.passes = 3000;
    p.busy_passes = 750;  // 500 of the 2,000 new passes did work
    ThreadSnapshot second;
    S::thread_passes(p, 2.0, st, second);
    EXPECT_DOUBLE_EQ(second.pass_rate, 1000);
    EXPECT_DOUBLE_EQ(second.empty_pass_ratio, 0.75);
}

TEST(AggregatorStages, WakeQuantilesAreThoseOfTheIntervalAlone) {
    S::ThreadState st;
    iou_sched_state ss{};
    ss.lat_hist[20] = 1000;  // ~1 ms wakes before the interval
    ThreadSnapshot before;
    S::thread_wake_latency(ss, st, before);
    ss.lat_hist[10] = 100;  // ~1 us wakes in it
    ThreadSnapshot now;
    S::thread_wake_latency(ss, st, now);
    EXPECT_LT(now.wake_p99_seconds, 1e-5) << "the old 1 ms wakes leaked into this interval";
    EXPECT_GT(before.wake_p50_seconds, 1e-4);
}

}  // namespace
}  // namespace iouscope
