// The ring stage (model/aggregator_rings.cpp): modes, counters across the 32-bit wrap, ring ids,
// backlog, and the deep tier's ring work and io_do_iopoll figures.
#include <gtest/gtest.h>

#include "tests/unit/model/aggregator_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

TEST(Aggregator, ModesFromSetupFlags) {
    EXPECT_EQ(ring_mode(0), "plain");
    EXPECT_EQ(ring_mode(1), "iopoll");
    EXPECT_EQ(ring_mode(2), "sqpoll");
    EXPECT_EQ(ring_mode(3), "both");
    EXPECT_EQ(ring_mode(2 | 4 | 8), "sqpoll");
}

TEST(Aggregator, RingCountersAreExactAcrossTheWrap) {
    Aggregator a;
    a.update(sample(kSec, {ring(1, 10, 3, 0, 0xFFFFFF00u)}));
    auto s = a.update(sample(2 * kSec, {ring(1, 10, 3, 0, 0x100u)}));
    ASSERT_EQ(s.rings.size(), 1u);
    EXPECT_EQ(s.rings[0].sqes_total, 0x100000100ull);
    EXPECT_EQ(s.rings[0].id, "10:3");
    EXPECT_EQ(s.rings[0].mode, "plain");
    EXPECT_DOUBLE_EQ(s.rings[0].sqe_rate, 512.0);
}

TEST(Aggregator, RingIdIsStableAndFirstHolderWins) {
    Aggregator a;
    auto s = a.update(sample(kSec, {ring(7, 10, 3, 0, 5), ring(7, 11, 9, 0, 5)}));
    ASSERT_EQ(s.rings.size(), 1u);
    EXPECT_EQ(s.rings[0].id, "10:3");
    // The first holder exits; the ring keeps its name.
    s = a.update(sample(2 * kSec, {ring(7, 11, 9, 0, 6)}));
    ASSERT_EQ(s.rings.size(), 1u);
    EXPECT_EQ(s.rings[0].id, "10:3");
    EXPECT_EQ(s.rings[0].sqes_total, 6u);
}

TEST(Aggregator, BacklogIsTailMinusHeadModulo32) {
    Aggregator a;
    auto r = ring(1, 10, 3, kSqpoll, 0xFFFFFFFEu, 50);
    r.sq_tail = 3;  // the application's tail has wrapped, the kernel's head not yet
    auto s = a.update(sample(kSec, {r}));
    EXPECT_EQ(s.rings[0].sq_backlog, 5u);
}

TEST(Aggregator, DeepTierRingWorkAndIopoll) {
    Aggregator a;
    auto r1 = ring(1, 10, 3, kSqpoll | 1, 0, 50);
    auto r2 = ring(2, 10, 4, kSqpoll | 1, 0, 50);
    RawSample raw = sample(kSec, {r1, r2});
    raw.ring_work = {{1, {300'000'000, 10, 320, 450'000'000}}, {2, {100'000'000, 5, 160, 0}}};
    raw.iopoll = {{{1, IOU_CALLER_SQ_THREAD, 0}, {100, 40, 300, 50'000'000}}};
    a.update(raw);
    raw.mono_ns = 2 * kSec;
    raw.iopoll = {{{1, IOU_CALLER_SQ_THREAD, 0}, {300, 140, 700, 90'000'000}}};
    auto s = a.update(raw);
    const auto& ring1 = find_ring(s, "10:3");
    EXPECT_TRUE(ring1.has_sqthread_work);
    EXPECT_NEAR(ring1.sqthread_work_seconds, 0.39, 1e-12);  // submit 0.3 + polling 0.09
    ASSERT_EQ(ring1.iopoll.size(), 1u);
    EXPECT_EQ(ring1.iopoll[0].caller, "sq_thread");
    EXPECT_DOUBLE_EQ(ring1.iopoll[0].calls_rate, 200);
    EXPECT_DOUBLE_EQ(ring1.iopoll[0].empty_ratio, 0.5);
    EXPECT_DOUBLE_EQ(ring1.iopoll[0].completions_per_call, 2);
    EXPECT_NEAR(s.threads[0].rings_work_seconds, 0.49, 1e-12);
    EXPECT_NEAR(ring1.sqthread_submit_seconds, 0.3, 1e-12);
    // With the loop-pass probe a ring's work is its turn time instead.
    raw.ring_turns = true;
    s = a.update(raw);
    EXPECT_NEAR(find_ring(s, "10:3").sqthread_work_seconds, 0.45, 1e-12);
    EXPECT_NEAR(find_ring(s, "10:3").sqthread_submit_seconds, 0.3, 1e-12);
    raw.ring_turns = false;
    // A ring that goes away is reported so its BPF state can be dropped.
    raw.mono_ns = 3 * kSec + 1;
    raw.rings = {r1};
    raw.iopoll.push_back({{2, IOU_CALLER_APP, 0}, {10, 1, 40, 0}});
    s = a.update(raw);
    EXPECT_EQ(a.cleanup().rings, std::vector<std::uint64_t>{2});
    // Ring 2's final counts stay in the host totals after the sampler drops them.
    raw.mono_ns = 4 * kSec;
    raw.iopoll.pop_back();
    s = a.update(raw);
    std::uint64_t app = 0, sq = 0;
    for (const auto& io : s.iopoll_host) (io.caller == "app" ? app : sq) = io.completions;
    EXPECT_EQ(app, 40u);
    EXPECT_EQ(sq, 700u);
}
