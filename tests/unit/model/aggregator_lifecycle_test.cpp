// Identity and lifecycle (model/aggregator_lifecycle.cpp; docs/ARCHITECTURE.md, "Identity and
// lifecycle"): short-lived rings, expiry, reused ring addresses, map cleanup, incomplete walks.
#include <gtest/gtest.h>

#include "tests/unit/model/aggregator_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

TEST(Aggregator, ShortLivedRingsAreCountedOnce) {
    Aggregator a;
    iou_created_ring gone{};
    gone.ctx = 99;
    gone.setup_flags = kSqpoll;
    iou_created_ring stays{};
    stays.ctx = 1;
    RawSample raw = sample(kSec, {ring(1, 10, 3, 0, 0)});
    raw.created = {gone, stays};
    auto s = a.update(raw);
    ASSERT_EQ(s.rings_short_lived_by_mode.size(), 1u);
    EXPECT_EQ(s.rings_short_lived_by_mode[0], (std::pair<std::string, std::uint64_t>{"sqpoll", 1}));
    EXPECT_EQ(s.rings_created_by_mode.size(), 2u);
    // The walked ring's record drained one sample late is not short-lived.
    RawSample raw2 = sample(2 * kSec, {ring(1, 10, 3, 0, 0), ring(2, 10, 4, 0, 0)});
    iou_created_ring late{};
    late.ctx = 2;
    raw2.created = {late};
    s = a.update(raw2);
    EXPECT_EQ(s.rings_short_lived_by_mode[0].second, 1u);
}

TEST(Aggregator, VanishedThreadsExpireAfterAFewSamples) {
    Aggregator a;
    RawSample raw = sample(kSec, {ring(1, 10, 3, kSqpoll, 0, 50)});
    raw.sched.emplace_back(50, iou_sched_state{});
    a.update(raw);
    EXPECT_TRUE(a.cleanup().threads.empty());
    std::vector<std::uint32_t> expired;
    for (int i = 0; i < Aggregator::kExpireAfter; ++i) {
        RawSample r = sample((2 + i) * kSec, {});
        r.sched.emplace_back(50, iou_sched_state{});
        auto s = a.update(r);
        EXPECT_TRUE(s.threads.empty());
        EXPECT_TRUE(s.rings.empty());
        expired.insert(expired.end(), a.cleanup().threads.begin(), a.cleanup().threads.end());
    }
    EXPECT_EQ(expired, std::vector<std::uint32_t>{50});
}

TEST(AggregatorIdentity, ARingAtAReusedAddressStartsFromItsOwnCounts) {
    // The reproduction: 5,000 SQEs, the ring closes, the next one gets the same ctx and fd and
    // submits 100. A wrap would have read 2^32 + 100.
    Aggregator a;
    auto old_ring = ring(0x1000, 10, 3, 0, 5000);
    old_ring.born_ns = 1;
    a.update(sample(kSec, {old_ring}));
    auto new_ring = ring(0x1000, 10, 3, 0, 100);
    new_ring.born_ns = kSec + 5;
    RawSample first = sample(2 * kSec, {new_ring});
    first.unix_time = 1000;
    auto s = a.update(first);
    ASSERT_EQ(s.rings.size(), 1u);
    EXPECT_EQ(s.rings[0].sqes_total, 100u);
    EXPECT_EQ(s.rings[0].cqes_total, 100u);
    EXPECT_EQ(s.rings_replaced, 1u);
    // No rate from the old ring's counts either.
    EXPECT_DOUBLE_EQ(s.rings[0].sqe_rate, 0);
    // Its start time is its birth, told in Unix time, and stays put.
    EXPECT_DOUBLE_EQ(s.rings[0].start_time_seconds, 1000 - (kSec - 5) / 1e9);
    RawSample later = sample(3 * kSec, {new_ring});
    later.unix_time = 1001.5;
    s = a.update(later);
    EXPECT_DOUBLE_EQ(s.rings[0].start_time_seconds, 1000 - (kSec - 5) / 1e9);
}

TEST(AggregatorIdentity, ACounterThatGoesBackIsANewRingUnlessTheWrapIsProven) {
    // Rings created before iouscope attached have no birth time: the counters tell.
    Aggregator a;
    a.update(sample(kSec, {ring(0x1000, 10, 3, 0, 5000)}));
    auto s = a.update(sample(2 * kSec, {ring(0x1000, 10, 3, 0, 100)}));
    EXPECT_EQ(s.rings[0].sqes_total, 100u);
    EXPECT_EQ(s.rings_replaced, 1u);
    // From the top quarter of the range to the bottom quarter is a wrap, not a new ring.
    Aggregator b;
    b.update(sample(kSec, {ring(0x1000, 10, 3, 0, 0xF000'0000u)}));
    s = b.update(sample(2 * kSec, {ring(0x1000, 10, 3, 0, 0x10u)}));
    EXPECT_EQ(s.rings[0].sqes_total, 0x1'0000'0010ull);
    EXPECT_EQ(s.rings_replaced, 0u);
    WrappingCounter32 c;
    EXPECT_TRUE(c.continues(7));
    c.observe(0x8000'0000u);
    EXPECT_FALSE(c.continues(0x10u));  // a step of 2^31: no ring does that between samples
    EXPECT_TRUE(c.continues(0x8000'0001u));
}

TEST(AggregatorIdentity, EntriesOfRingsNoWalkSawGoAfterTwoMisses) {
    Aggregator a;
    RawSample raw = sample(kSec, {ring(1, 10, 3, 0, 0)});
    raw.ring_work = {{7, iou_ring_work{}}};
    raw.births = {{7, 123}, {1, 5}};
    raw.iopoll = {{{7, IOU_CALLER_APP, 0}, {4, 1, 3, 10}}};
    a.update(raw);
    // Ring 7 may have been created after the walk: it gets a second chance.
    EXPECT_TRUE(a.cleanup().rings.empty());
    raw.mono_ns = 2 * kSec;
    auto s = a.update(raw);
    EXPECT_EQ(a.cleanup().rings, std::vector<std::uint64_t>{7});
    // Its io_do_iopoll counts stay in the host totals once the entry is deleted.
    raw.mono_ns = 3 * kSec;
    raw.ring_work.clear();
    raw.iopoll.clear();
    raw.births = {{1, 5}};
    s = a.update(raw);
    ASSERT_EQ(s.iopoll_host.size(), 1u);
    EXPECT_EQ(s.iopoll_host[0].completions, 3u);
    EXPECT_TRUE(a.cleanup().rings.empty());
}

TEST(AggregatorIdentity, AnIncompleteWalkExpiresNothing) {
    Aggregator a;
    a.update(sample(kSec, {ring(1, 10, 3, 0, 50), ring(2, 10, 4, kSqpoll, 50, 60)}));
    for (int i = 0; i < Aggregator::kExpireAfter + 1; ++i) {
        RawSample partial = sample((2 + i) * kSec, {ring(1, 10, 3, 0, 60)});
        partial.walk_complete = false;
        auto s = a.update(partial);
        EXPECT_TRUE(a.cleanup().empty());
        EXPECT_EQ(s.walks_incomplete, static_cast<std::uint64_t>(i + 1));
    }
    // Ring 2 was not reached, not closed: it carries on from where it was.
    auto s = a.update(sample(9 * kSec, {ring(1, 10, 3, 0, 70), ring(2, 10, 4, kSqpoll, 80, 60)}));
    EXPECT_EQ(find_ring(s, "10:4").sqes_total, 80u);
    EXPECT_EQ(s.rings_replaced, 0u);
}

TEST(AggregatorIdentity, WakersOfExpiredThreadsGoInOnePass) {
    Aggregator a;
    RawSample raw = sample(kSec, {ring(1, 10, 3, kSqpoll, 0, 50), ring(2, 10, 4, kSqpoll, 0, 51)});
    for (std::uint32_t w = 0; w < 100; ++w) {
        raw.wakers.push_back({{50, w, IOU_WAKER_TASK, 0}, {0, 1, "x"}});
        raw.wakers.push_back({{51, w, IOU_WAKER_TASK, 0}, {0, 1, "x"}});
    }
    a.update(raw);
    std::size_t deleted = 0;
    for (int i = 0; i < Aggregator::kExpireAfter; ++i) {
        raw.mono_ns = (2 + i) * kSec;
        raw.rings = {ring(2, 10, 4, kSqpoll, 0, 51)};
        a.update(raw);
        for (const auto& k : a.cleanup().wakers) {
            EXPECT_EQ(k.sq_tid, 50u);
            ++deleted;
        }
    }
    EXPECT_EQ(deleted, 100u);
}
