// The idle model (model/advisor_idle_model.cpp): the work-gap buckets both sides use, the cost
// of a spin, the gaps open at the window's edges, jiffies and nanosecond settings, sampled gaps.
#include <gtest/gtest.h>

#include "tests/unit/model/advisor_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

// gap_bucket_index() runs the BPF program's own iou_gap_bucket() (include/iouscope/gap_bucket.h),
// so these pin the layout both sides use.
TEST(GapBuckets, TheBpfLayout) {
    EXPECT_EQ(gap_bucket_index(0), 0u);
    EXPECT_EQ(gap_bucket_index(63), 0u);
    EXPECT_EQ(gap_bucket_index(64), 1u);
    EXPECT_EQ(gap_bucket_index(80), 2u);  // 64 + 16
    EXPECT_EQ(gap_bucket_index(127), 4u);
    EXPECT_EQ(gap_bucket_index(128), 5u);
    EXPECT_EQ(gap_bucket_index(~0ull), static_cast<std::size_t>(IOU_GAP_BUCKETS - 1));
    for (std::uint64_t v : {64ull, 100ull, 5'000ull, 123'456'789ull, 45'050'000ull}) {
        const auto b = gap_bucket_index(v);
        EXPECT_LE(gap_bucket_lower_ns(b), v) << v;
        EXPECT_GT(gap_bucket_upper_ns(b), v) << v;
        // A quarter octave at most.
        EXPECT_LE(gap_bucket_upper_ns(b) / gap_bucket_lower_ns(b), 1.25 + 1e-9) << v;
    }
    EXPECT_TRUE(std::isinf(gap_bucket_upper_ns(IOU_GAP_BUCKETS - 1)));
}

TEST(IdleModel, SpinAndWakesForFixedSpin) {
    const auto w = gap_window(WorkGaps{}, bursty(10), 10);
    // 4 ms spin: every in-burst gap fully, 4 ms of each long gap, then a sleep.
    auto c = idle_cost_fixed(w, 0.004);
    EXPECT_NEAR(c.cpu_seconds, 200 * 99 * 50e-6 + 200 * 0.004, 0.01);
    EXPECT_NEAR(c.wakeups, 200, 1e-9);
    // Spinning longer than every gap: the thread never sleeps and is on the CPU all the time.
    c = idle_cost_fixed(w, 1.0);
    EXPECT_NEAR(c.cpu_seconds, 200 * (99 * 50e-6 + 45.05e-3), 1e-6);
    EXPECT_EQ(c.wakeups, 0);
}

// A gap runs from one batch's end to the next's, so a sleeping gap still holds the next batch's
// work: 2,000 gaps of 450 us, 50 us of it work each, at an idle of 100 us cost 100 + 50 us each.
TEST(IdleModel, TheWorkAfterEachWakeUpIsCharged) {
    ThreadSnapshot a, b;
    b.gaps = WorkGaps{};
    add_gaps(b.gaps, 450'000, 2000);
    b.work_seconds = 2000 * 50e-6;
    const auto w = thread_gap_window(a, b, 1.0);
    EXPECT_NEAR(w.work_per_gap_s, 50e-6, 1e-15);
    const auto c = idle_cost_fixed(w, 100e-6);
    EXPECT_NEAR(c.wakeups, 2000, 1e-9);
    EXPECT_NEAR(c.cpu_seconds, 2000 * 150e-6, 1e-9);
    // Spinning through every gap costs the gaps, work included, and no more.
    EXPECT_NEAR(idle_cost_fixed(w, 1e-3).cpu_seconds, 2000 * 450e-6, 1e-9);
}

TEST(IdleModel, OpenGapsAtTheWindowEdges) {
    // No SQE in the window: the gap open at the start grows by the window.
    WorkGaps a, b;
    a.open_gap_seconds = 0.5;
    b.open_gap_seconds = 10.5;
    const auto w = gap_window(a, b, 10);
    EXPECT_NEAR(idle_cost_fixed(w, 1.0).cpu_seconds, 0.5, 1e-9);  // spun until 1 s, then slept
    EXPECT_NEAR(idle_cost_fixed(w, 0.2).cpu_seconds, 0.0, 1e-9);  // asleep before the window
    EXPECT_NEAR(idle_cost_fixed(w, 60).cpu_seconds, 10, 1e-9);    // spun throughout
}

TEST(IdleModel, JiffiesSpinBetweenOneAndTwoTicksMore) {
    const auto w = gap_window(WorkGaps{}, bursty(10), 10);
    // 1 jiffy at HZ=250 spins (4, 8] ms, 6 ms on average.
    const auto c = idle_cost_jiffies(w, 1, 250);
    EXPECT_NEAR(c.cpu_seconds, 200 * 99 * 50e-6 + 200 * 0.006, 0.02);
    const auto curve = idle_curve(w, 1.0, false, false, 250);
    ASSERT_FALSE(curve.empty());
    EXPECT_DOUBLE_EQ(curve.front().setting_seconds, 0.001);  // 1 ms rounds up to one tick
    EXPECT_NEAR(curve.front().effective_seconds, 0.006, 1e-9);
    int current = 0;
    for (const auto& p : curve) current += p.current;
    EXPECT_EQ(current, 1);
    // Settings that round to the same tick appear once.
    for (std::size_t i = 1; i < curve.size(); ++i)
        EXPECT_NE(curve[i].effective_seconds, curve[i - 1].effective_seconds);
}

TEST(IdleModel, NanosecondKernelsOfferSubMillisecondValues) {
    const auto w = gap_window(WorkGaps{}, bursty(10), 10);
    const auto curve = idle_curve(w, 0.01, true, true, 0);
    ASSERT_FALSE(curve.empty());
    EXPECT_NEAR(curve.front().setting_seconds, 20e-6, 1e-12);
    EXPECT_DOUBLE_EQ(curve.front().setting_seconds, curve.front().effective_seconds);
}

// Sampled gaps: 4 s of a 40 s window recorded are scaled by 10, and the curve they give is the
// one every gap gives; no gap is open at the ends of a sampled window.
TEST(IdleModel, SampledGapsAreScaledByTheWindowOverTheRecordedTime) {
    WorkGaps every = bursty(40);
    WorkGaps sampled = bursty(4);
    sampled.open_gap_seconds = 0.03;
    WorkGaps from;
    from.recorded_seconds = 10;
    sampled.recorded_seconds = 14;
    WorkGaps from_every;
    const GapWindow a = gap_window(from_every, every, 40);
    const GapWindow b = gap_window(from, sampled, 40);
    EXPECT_EQ(b.open_end_s, 0);
    for (double spin : {1e-3, 10e-3, 50e-3}) {
        EXPECT_NEAR(idle_cost_fixed(b, spin).cpu_seconds, idle_cost_fixed(a, spin).cpu_seconds,
                    1e-9);
        EXPECT_NEAR(idle_cost_fixed(b, spin).wakeups, idle_cost_fixed(a, spin).wakeups, 1e-9);
    }
    // Nothing recorded in the window: no counts at all, never counts scaled by infinity.
    from.recorded_seconds = 14;
    const GapWindow none = gap_window(from, sampled, 40);
    double total = 0;
    for (double c : none.count) total += c;
    EXPECT_EQ(total, 0);
}
