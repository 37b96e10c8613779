// The duty-cycled work-gap probe: its flag, the recorded time of its windows, and the estimator
// (include/iouscope/gap_sampling.h, the code the BPF program runs) against every gap of the
// same timeline.
#include "model/gap_sampling.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "iouscope/gap_sampling.h"
#include "model/advisor.hpp"

using namespace iouscope;
using namespace std::chrono_literals;

TEST(GapSamplingFlag, OnSlashPeriodOrOff) {
    GapSamplingConfig c;
    EXPECT_FALSE(parse_gap_sampling("6s/60s", c));
    EXPECT_EQ(c.on, 6s);
    EXPECT_EQ(c.period, 60s);
    EXPECT_TRUE(c.enabled());
    EXPECT_FALSE(parse_gap_sampling("off", c));
    EXPECT_FALSE(c.enabled());
    for (const char* bad : {"6s", "6s/", "x/60s", "2s/60s", "6s/6s", "6s/5s", "6s/2h", "", "/"}) {
        auto err = parse_gap_sampling(bad, c);
        ASSERT_TRUE(err) << bad;
        EXPECT_NE(err->find("--probes.gap-sampling"), std::string::npos) << *err;
    }
}

TEST(GapWindowLedger, EachWindowRecordsFromItsCutoffToItsEnd) {
    constexpr std::uint64_t s = 1'000'000'000;
    GapWindowLedger l(2 * s);
    EXPECT_EQ(l.recorded_seconds(5 * s), 0);
    l.open(10 * s, 16 * s);
    EXPECT_TRUE(l.active(10 * s));
    EXPECT_EQ(l.recorded_seconds(11 * s), 0);
    EXPECT_EQ(l.recorded_seconds(13 * s), 1);
    EXPECT_EQ(l.recorded_seconds(16 * s), 4);
    EXPECT_FALSE(l.active(16 * s));
    EXPECT_EQ(l.recorded_seconds(60 * s), 4);
    l.open(70 * s, 76 * s);
    EXPECT_EQ(l.recorded_seconds(71 * s), 4);
    EXPECT_EQ(l.recorded_seconds(75 * s), 7);
    EXPECT_EQ(l.recorded_seconds(99 * s), 8);
    EXPECT_EQ(l.windows(), 2u);
}

// A window that closed early records and costs up to its new end; the next opens as usual.
TEST(GapWindowLedger, AWindowClosedEarlyEndsItsRecordedAndAttachedTime) {
    constexpr std::uint64_t s = 1'000'000'000;
    GapWindowLedger l(2 * s);
    l.open(10 * s, 16 * s);
    EXPECT_EQ(l.attached_seconds(12 * s), 2);
    l.close(13 * s + s / 2);
    EXPECT_FALSE(l.active(14 * s));
    EXPECT_EQ(l.recorded_seconds(20 * s), 1.5);
    EXPECT_EQ(l.attached_seconds(20 * s), 3.5);
    EXPECT_EQ(l.closed_early(), 1u);
    l.close(15 * s);  // later than the end it has: not a close
    EXPECT_EQ(l.closed_early(), 1u);
    EXPECT_EQ(l.recorded_seconds(20 * s), 1.5);
    l.open(70 * s, 76 * s);
    EXPECT_EQ(l.recorded_seconds(99 * s), 5.5);
    EXPECT_EQ(l.attached_seconds(99 * s), 9.5);
    EXPECT_EQ(l.windows(), 2u);
}

namespace {

constexpr double kNs = 1e9;

// A timeline of one SQ thread's SQEs, ns: bursts of 20 SQEs 100 us apart every 50 ms, and every
// 7 s a pause of 3 s, longer than the windows; jitter from the seed.
std::vector<std::uint64_t> timeline(double seconds, unsigned seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> jitter(0, 5e6);
    std::vector<std::uint64_t> t;
    double now = 1e6;
    while (now < seconds * kNs) {
        const bool pause = std::fmod(now, 7 * kNs) < 50e6;
        now += pause ? 3 * kNs : 50e6 + jitter(rng);
        for (int i = 0; i < 20; ++i) t.push_back(static_cast<std::uint64_t>(now + i * 100e3));
    }
    return t;
}

WorkGaps empty_gaps() {
    WorkGaps g;
    g.count.assign(IOU_GAP_BUCKETS, 0);
    g.sum_ns.assign(IOU_GAP_BUCKETS, 0);
    return g;
}

void add(WorkGaps& g, std::uint64_t gap) {
    const auto b = std::min<std::size_t>(iou_gap_bucket(gap), IOU_GAP_BUCKETS - 1);
    g.count[b] += 1;
    g.sum_ns[b] += gap;
}

// Every gap, as the per-batch probes record them.
GapWindow every_gap(const std::vector<std::uint64_t>& t, double seconds) {
    WorkGaps g = empty_gaps();
    for (std::size_t i = 1; i < t.size(); ++i) add(g, t[i] - t[i - 1]);
    g.open_gap_seconds = seconds - t.back() / kNs;
    return gap_window(empty_gaps(), g, seconds);
}

// Windows of `on` every `period` from `phase`, through the BPF program's own decisions. With
// `cutoff` 0 and no cut gaps it is the naive reading: gaps between SQEs of one window, scaled by
// the time the windows were open.
GapWindow sampled(const std::vector<std::uint64_t>& t, double seconds, double on, double period,
                  double phase, double cutoff, bool naive = false) {
    WorkGaps g = empty_gaps();
    __u64 last = 0;
    double recorded = 0;
    std::size_t i = 0;
    for (double w = phase; w + on <= seconds; w += period) {
        const auto start = static_cast<std::uint64_t>(w * kNs);
        const auto end = static_cast<std::uint64_t>((w + on) * kNs);
        recorded += on - cutoff;
        for (; i < t.size() && t[i] < end; ++i) {
            if (!iou_gap_in_window(t[i], 0, start, end)) continue;
            if (naive) {
                if (last >= start) add(g, t[i] - last);
                last = t[i];
                continue;
            }
            if (auto gap =
                    iou_gap_sampled(t[i], &last, start, static_cast<std::uint64_t>(cutoff * kNs)))
                add(g, gap);
        }
    }
    WorkGaps from = empty_gaps();
    from.recorded_seconds = 0;
    g.recorded_seconds = recorded;
    return gap_window(from, g, seconds);
}

}  // namespace

// Over many phases the sampled estimate of every setting's CPU and sleeps is the full-rate one:
// mean within 2 %. Reading the gaps of each window without the cutoff misses every gap longer
// than what is left of the window, and under-counts the long pauses' sleeps by far more.
TEST(GapSampling, TheEstimateIsUnbiasedForEverySettingUpToTheCutoff) {
    constexpr double kSeconds = 600, kOn = 3, kPeriod = 6;
    const double kCutoff = static_cast<double>(kGapCutoff.count()) / kNs;
    const auto t = timeline(kSeconds, 7);
    const GapWindow full = every_gap(t, kSeconds);
    // Stratified phases: the timeline's pauses fall at whole seconds of the period, which a grid
    // of phases would sample unevenly.
    constexpr int kPhases = 240;
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> within(0, 1);
    for (double spin : {20e-6, 1e-3, 10e-3, 100e-3, 1.0, 2.0}) {
        SCOPED_TRACE(spin);
        const IdleCost f = idle_cost_fixed(full, spin);
        double cpu = 0, wakeups = 0, naive_wakeups = 0;
        for (int p = 0; p < kPhases; ++p) {
            const double phase = kPeriod * (p + within(rng)) / kPhases;
            const IdleCost s =
                idle_cost_fixed(sampled(t, kSeconds, kOn, kPeriod, phase, kCutoff), spin);
            cpu += s.cpu_seconds / kPhases;
            wakeups += s.wakeups / kPhases;
            naive_wakeups +=
                idle_cost_fixed(sampled(t, kSeconds, kOn, kPeriod, phase, 0, true), spin).wakeups /
                kPhases;
        }
        EXPECT_NEAR(cpu, f.cpu_seconds, 0.02 * f.cpu_seconds);
        EXPECT_NEAR(wakeups, f.wakeups, 0.02 * f.wakeups + 0.5);
        if (spin >= 1.0) {
            EXPECT_LT(naive_wakeups, 0.8 * f.wakeups) << "the naive reading";
        }
    }
}

// One phase: what a single run gives, within a tenth.
TEST(GapSampling, OneRunIsWithinATenth) {
    constexpr double kSeconds = 600;
    const auto t = timeline(kSeconds, 11);
    const GapWindow full = every_gap(t, kSeconds);
    const GapWindow one =
        sampled(t, kSeconds, 6, 60, 1.3, static_cast<double>(kGapCutoff.count()) / kNs);
    for (double spin : {1e-3, 10e-3, 100e-3}) {
        EXPECT_NEAR(idle_cost_fixed(one, spin).cpu_seconds, idle_cost_fixed(full, spin).cpu_seconds,
                    0.1 * idle_cost_fixed(full, spin).cpu_seconds)
            << spin;
    }
}
