// Light walks' schedule and what they carry (model/ring_carry.hpp), and the aggregator's reading
// of carried records: counts as they were, rates of the last record read.
#include "model/ring_carry.hpp"

#include <gtest/gtest.h>

#include <set>

#include "tests/unit/model/aggregator_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

namespace {

constexpr std::uint32_t kIopoll = 1;

std::multiset<std::uint64_t> ctxs(const RawSample& raw, std::size_t from = 0) {
    std::multiset<std::uint64_t> out;
    for (std::size_t i = from; i < raw.rings.size(); ++i) out.insert(raw.rings[i].ctx);
    return out;
}

// A sample at second t whose walk read `rings`; light as the walk was.
RawSample walked(std::uint64_t t, std::vector<iou_ring_record> rings, bool light) {
    RawSample raw = sample(t * kSec, std::move(rings));
    raw.light_walk = light;
    return raw;
}

// A first full walk of `rings` at second 0: light walks start after the second.
void prime(RingCarry& c, std::vector<iou_ring_record> rings) {
    RawSample raw = walked(0, std::move(rings), false);
    c.splice(raw);
    c.keep(raw);
}

}  // namespace

TEST(RingCarry, FullWalksComeOncePerPeriodWhateverTheJitter) {
    RingCarry c(5 * kSec, kSec);
    EXPECT_FALSE(c.light(0)) << "nothing walked yet";
    std::vector<bool> light;
    for (std::uint64_t t = 0; t < 15; ++t) {
        // Samples drift up to 0.3 s either way of the second.
        const std::uint64_t mono =
            t * kSec + (t % 2 ? 300'000'000 : 0) - (t % 3 == 2 ? 300'000'000 : 0);
        const bool l = c.light(mono);
        light.push_back(l);
        RawSample raw = sample(mono, {ring(1, 10, 3, 0, 0)});
        raw.light_walk = l;
        c.splice(raw);
        c.keep(raw);
    }
    // The first two are full: every ring is read twice before any is carried.
    EXPECT_EQ(light, (std::vector<bool>{false, false, true, true, true, true, false, true, true,
                                        true, true, false, true, true, true}));
}

TEST(RingCarry, ZeroPeriodOrAPeriodWithinTheIntervalNeverWalksLight) {
    for (auto [period, interval] : {std::pair<std::uint64_t, std::uint64_t>{0, kSec},
                                    std::pair<std::uint64_t, std::uint64_t>{kSec, kSec}}) {
        RingCarry c(period, interval);
        for (std::uint64_t t = 0; t < 4; ++t) {
            EXPECT_FALSE(c.light(t * kSec)) << period << " at " << t;
            RawSample raw = walked(t, {ring(1, 10, 3, 0, 0)}, false);
            c.splice(raw);
            c.keep(raw);
        }
    }
}

TEST(RingCarry, ALightWalkCarriesThePlainRingsItPassedOverAndNothingElse) {
    RingCarry c(5 * kSec, kSec);
    prime(c, {});
    RawSample full =
        walked(0,
               {ring(1, 10, 3, 0, 7), ring(2, 10, 4, kSqpoll, 9, 100), ring(3, 10, 5, kIopoll, 2),
                ring(4, 11, 3, 0, 1), ring(4, 12, 6, 0, 1)},
               false);
    c.splice(full);
    EXPECT_EQ(full.carried, 0u);
    c.keep(full);
    ASSERT_TRUE(c.light(kSec));
    // The light walk read the SQPOLL and IOPOLL rings, and plain ring 5, born since; it passed
    // over 1 and both holders of 4.
    RawSample light = walked(
        1, {ring(2, 10, 4, kSqpoll, 12, 100), ring(3, 10, 5, kIopoll, 3), ring(5, 10, 6, 0, 0)},
        true);
    c.splice(light);
    EXPECT_EQ(light.carried, 3u);
    EXPECT_EQ(ctxs(light, 3), (std::multiset<std::uint64_t>{1, 4, 4}));
    EXPECT_EQ(light.rings[3].sq_head, 7u) << "as the full walk read it";
    c.keep(light);
    // The next light walk read ring 1 itself (its order entry lost): ring 1 is not carried
    // twice, and ring 5, read last time, is carried now.
    ASSERT_TRUE(c.light(2 * kSec));
    RawSample next = walked(
        2, {ring(1, 10, 3, 0, 8), ring(2, 10, 4, kSqpoll, 13, 100), ring(3, 10, 5, kIopoll, 4)},
        true);
    c.splice(next);
    EXPECT_EQ(ctxs(next, 3), (std::multiset<std::uint64_t>{4, 4, 5}));
    EXPECT_EQ(next.carried, 3u);
}

TEST(RingCarry, AnIncompleteWalkIsFollowedByAFullOne) {
    RingCarry c(5 * kSec, kSec);
    prime(c, {ring(1, 10, 3, 0, 7)});
    RawSample full = walked(0, {ring(1, 10, 3, 0, 7)}, false);
    c.splice(full);
    c.keep(full);
    RawSample light = walked(1, {}, true);
    light.walk_complete = false;  // rings it did not reach are not in it, nor carried by it
    c.splice(light);
    c.keep(light);
    EXPECT_FALSE(c.light(2 * kSec));
    RawSample again = walked(2, {ring(1, 10, 3, 0, 8)}, false);
    again.walk_complete = false;
    c.splice(again);
    c.keep(again);
    EXPECT_FALSE(c.light(3 * kSec)) << "an incomplete full walk does not start a period";
}

TEST(Aggregator, ACarriedRingKeepsItsCountsAndTheRatesOfItsLastRead) {
    Aggregator a;
    const auto at = [&](std::uint64_t t, std::uint32_t head, bool carried) {
        RawSample raw = sample(t * kSec, {ring(1, 10, 3, 0, head)});
        raw.light_walk = carried;
        raw.carried = carried ? 1 : 0;
        return a.update(raw);
    };
    at(0, 100, false);
    auto s = at(1, 200, false);
    EXPECT_DOUBLE_EQ(s.rings[0].sqe_rate, 100.0);
    for (std::uint64_t t = 2; t < 5; ++t) {
        s = at(t, 200, true);
        EXPECT_EQ(s.rings[0].sqes_total, 200u);
        EXPECT_DOUBLE_EQ(s.rings[0].sqe_rate, 100.0) << "the last read's, at " << t;
        EXPECT_EQ(s.rings_carried, 1u);
    }
    // Read again after four seconds: 800 SQEs over them.
    s = at(5, 1000, false);
    EXPECT_EQ(s.rings[0].sqes_total, 1000u);
    EXPECT_DOUBLE_EQ(s.rings[0].sqe_rate, 200.0);
    EXPECT_DOUBLE_EQ(s.rings[0].cqe_rate, 200.0);
    EXPECT_EQ(s.walks_light, 3u);
    EXPECT_EQ(s.rings_carried, 0u);
}

TEST(RingCarry, ARingWhoseFdNowHoldsAnotherIsNotCarried) {
    RingCarry c(5 * kSec, kSec);
    prime(c, {});
    RawSample full = walked(0, {ring(1, 10, 3, 0, 4), ring(2, 10, 4, 0, 4)}, false);
    c.splice(full);
    c.keep(full);
    // Ring 1 closed and a new ring took its fd: carried, 1 would name "10:3" beside ring 9.
    RawSample light = walked(1, {ring(9, 10, 3, 0, 0)}, true);
    c.splice(light);
    EXPECT_EQ(ctxs(light, 1), (std::multiset<std::uint64_t>{2}));
    EXPECT_EQ(light.carried, 1u);
}

TEST(Aggregator, ACarriedRingKeepsTheDeepFiguresOfItsLastRead) {
    // A light walk passed over the ring at 0x1 while the map under that address already holds a
    // newer ring's work: the carried ring shows its own last figures, never a count that went
    // back.
    Aggregator a;
    const auto at = [&](std::uint64_t t, std::uint64_t submit_ns, bool carried) {
        RawSample raw = sample(t * kSec, {ring(1, 10, 3, 0, 5)});
        iou_ring_work w{};
        w.submit_ns = submit_ns;
        w.batches = submit_ns / 10;
        raw.ring_work.emplace_back(1, w);
        raw.light_walk = carried;
        raw.carried = carried ? 1 : 0;
        return a.update(raw);
    };
    at(0, 100, false);
    auto s = at(1, 200, false);
    EXPECT_DOUBLE_EQ(s.rings[0].sqthread_submit_seconds, 200e-9);
    s = at(2, 40, true);
    EXPECT_TRUE(s.rings[0].has_sqthread_work);
    EXPECT_DOUBLE_EQ(s.rings[0].sqthread_submit_seconds, 200e-9);
    EXPECT_EQ(s.rings[0].sqthread_batches, 20u);
}
