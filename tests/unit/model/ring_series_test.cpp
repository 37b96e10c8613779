#include "model/ring_series.hpp"

#include <gtest/gtest.h>

#include <set>

using namespace iouscope;

namespace {

struct R {
    std::uint64_t ctx;
    std::uint64_t sqes;
    std::string mode = "plain";
    std::uint32_t pid = 10;
    std::string id = "";  // "pid:ctx" when empty
};

// The sample at monotonic second t (the first has no interval).
Snapshot at(double t, const std::vector<R>& rings) {
    Snapshot s;
    s.monotonic_seconds = t;
    s.interval_seconds = t > 0 ? 1 : 0;
    for (const auto& r : rings) {
        RingSnapshot x;
        x.ctx = r.ctx;
        x.id = r.id.empty() ? std::to_string(r.pid) + ":" + std::to_string(r.ctx) : r.id;
        x.pid = r.pid;
        x.comm = "p" + std::to_string(r.pid);
        x.mode = r.mode;
        x.sqes_total = x.cqes_total = r.sqes;
        s.rings.push_back(x);
    }
    return s;
}

std::set<std::uint64_t> held(const Snapshot& s) {
    std::set<std::uint64_t> out;
    for (const auto& r : s.rings)
        if (!r.folded) out.insert(r.ctx);
    return out;
}

}  // namespace

TEST(RingSeries, LimitZeroGivesEveryRingItsSeries) {
    RingSeries p(0);
    auto s = at(0, {{1, 0}, {2, 0}, {3, 5}});
    p.apply(s);
    EXPECT_EQ(held(s), (std::set<std::uint64_t>{1, 2, 3}));
    EXPECT_TRUE(s.folded.empty());
    EXPECT_EQ(s.ring_series_limit, 0u);
}

TEST(RingSeries, UnderTheLimitNothingIsFoldedIdleOrNot) {
    RingSeries p(3);
    auto s = at(0, {{1, 0}, {2, 0}, {3, 0}});
    p.apply(s);
    EXPECT_EQ(held(s), (std::set<std::uint64_t>{1, 2, 3}));
    EXPECT_TRUE(s.folded.empty());
}

TEST(RingSeries, SqpollAndIopollRingsAreNeverFoldedNorCounted) {
    RingSeries p(1);
    auto s = at(0, {{1, 0, "sqpoll"}, {2, 0, "iopoll"}, {3, 0, "both"}, {4, 9}, {5, 0}});
    p.apply(s);
    EXPECT_EQ(held(s), (std::set<std::uint64_t>{1, 2, 3, 4}));  // 4: the most SQEs
    ASSERT_EQ(s.folded.size(), 1u);
    EXPECT_EQ(s.folded[0].rings, 1u);
}

TEST(RingSeries, AnActiveRingTakesThePlaceOfOneThatNeverDidAnything) {
    RingSeries p(2);
    auto s0 = at(0, {{1, 0}, {2, 0}, {3, 0}});
    p.apply(s0);
    EXPECT_EQ(held(s0), (std::set<std::uint64_t>{1, 2}));
    auto s1 = at(1, {{1, 0}, {2, 0}, {3, 4}});
    p.apply(s1);
    EXPECT_EQ(held(s1), (std::set<std::uint64_t>{1, 3}));  // 2: the higher address goes first
    // Ring 3 did its 4 SQEs in the interval it was promoted in: its own series carries them.
    ASSERT_EQ(s1.folded.size(), 1u);
    EXPECT_EQ(s1.folded[0].rings, 1u);
    EXPECT_EQ(s1.folded[0].sqes_total, 0u);
}

// Ring 1 holds the place; ring 2 becomes busier. It takes the place only once 1 has held it a
// minute and 2 is more than twice as busy; two rings about as busy never swap.
TEST(RingSeries, APlaceChangesHandsOnlyForTwiceTheActivityAfterAMinute) {
    RingSeries p(1);
    std::uint64_t one = 0, two = 0;
    auto s = at(0, {{1, one}, {2, two}});
    p.apply(s);
    for (int t = 1; t <= 120; ++t) {  // both 10 SQEs a second: no swap, ever
        one += 10;
        two += 10;
        s = at(t, {{1, one}, {2, two}});
        p.apply(s);
        ASSERT_EQ(held(s), (std::set<std::uint64_t>{1})) << t;
    }
    int swapped = -1;
    for (int t = 121; t <= 600 && swapped < 0; ++t) {  // 2 at 30 a second, 1 at 10
        one += 10;
        two += 30;
        s = at(t, {{1, one}, {2, two}});
        p.apply(s);
        if (held(s) == std::set<std::uint64_t>{2}) swapped = t;
    }
    // At t = 120 both weigh 20/s * 300 s * (1 - e^-0.4) = 1978; x seconds on, 1 weighs
    // 1978 e^(-x/300) + 6000 (1 - e^(-x/300)) and 2 the same with 18000. 2 > 2 * 1 from
    // e^(-x/300) < 6000 / 7978, x > 85.5 s: at t = 206.
    EXPECT_EQ(swapped, 206);
    // Ring 1 got busy again at once: 2 has held it less than a minute, so it stays.
    for (int t = swapped + 1; t < swapped + 60; ++t) {
        one += 1000;
        s = at(t, {{1, one}, {2, two}});
        p.apply(s);
        ASSERT_EQ(held(s), (std::set<std::uint64_t>{2})) << t;
    }
    s = at(swapped + 60, {{1, one + 1000}, {2, two}});
    p.apply(s);
    EXPECT_EQ(held(s), (std::set<std::uint64_t>{1}));
}

TEST(RingSeries, FoldCountersNeverGoBackAndLeaveWithTheProcess) {
    RingSeries p(1);
    auto s = at(0, {{1, 100}, {2, 50, "plain", 20}});
    p.apply(s);
    EXPECT_EQ(held(s), (std::set<std::uint64_t>{1}));
    ASSERT_EQ(s.folded.size(), 1u);
    EXPECT_EQ(s.folded[0].pid, 20u);
    EXPECT_EQ(s.folded[0].sqes_total, 0u);  // before the first sample: not the fold's
    s = at(1, {{1, 100}, {2, 57, "plain", 20}, {3, 5, "plain", 20}});  // 3 born with 5
    p.apply(s);
    // 2 took 1's place (1 never did anything since seen); 3, less busy, waits: one place.
    EXPECT_EQ(held(s), (std::set<std::uint64_t>{2}));
    ASSERT_EQ(s.folded.size(), 2u);
    EXPECT_EQ(s.folded[0].pid, 10u);
    EXPECT_EQ(s.folded[0].rings, 1u);
    EXPECT_EQ(s.folded[0].sqes_total, 0u);
    EXPECT_EQ(s.folded[1].pid, 20u);
    EXPECT_EQ(s.folded[1].rings, 1u);
    EXPECT_EQ(s.folded[1].sqes_total, 5u);                   // ring 3, born folded: all of its SQEs
    s = at(2, {{2, 57, "plain", 20}, {3, 6, "plain", 20}});  // pid 10 closed its ring
    p.apply(s);
    ASSERT_EQ(s.folded.size(), 1u);
    EXPECT_EQ(s.folded[0].pid, 20u);
    EXPECT_EQ(s.folded[0].sqes_total, 6u);
    s = at(3, {{4, 0, "plain", 30}});  // pid 20 gone: its fold goes
    p.apply(s);
    EXPECT_TRUE(s.folded.empty());
    EXPECT_EQ(held(s), (std::set<std::uint64_t>{4}));
}

TEST(RingSeries, ANewRingAtAClosedRingsAddressStartsAfresh) {
    RingSeries p(1);
    auto s = at(0, {{1, 0}, {2, 0}});
    p.apply(s);
    s = at(1, {{1, 3}, {2, 0}});
    p.apply(s);
    EXPECT_EQ(held(s), (std::set<std::uint64_t>{1}));
    // Ring 1 closed and another took its address: the newcomer is new, not the held ring.
    s = at(2, {{1, 0, "plain", 10, "10:99"}, {2, 2}});
    p.apply(s);
    EXPECT_EQ(held(s), (std::set<std::uint64_t>{2}));  // the newcomer has done nothing yet
}

// Exact at scale: 10,000 plain rings, 100 of them active, 50 places.
TEST(RingSeries, TenThousandRingsFoldExactly) {
    RingSeries p(50);
    std::vector<R> rings;
    for (std::uint64_t i = 1; i <= 10'000; ++i) rings.push_back({i, 0});
    auto s = at(0, rings);
    p.apply(s);
    // Rings 100, 200, ..., 10,000 submit 1, 2, ..., 100 SQEs; rings 1..50 hold the places and
    // never did anything, so each yields to one of the 50 busiest.
    for (std::uint64_t i = 0; i < 100; ++i) rings[i * 100 + 99].sqes = 1 + i;
    s = at(1, rings);
    p.apply(s);
    const auto h = held(s);
    ASSERT_EQ(h.size(), 50u);
    for (auto ctx : h) EXPECT_EQ(ctx % 100, 0u) << ctx;  // every place went to an active ring
    for (std::uint64_t i = 50; i < 100; ++i) EXPECT_TRUE(h.count((i + 1) * 100)) << i;  // most
    ASSERT_EQ(s.folded.size(), 1u);
    EXPECT_EQ(s.folded[0].rings, 9'950u);
    std::uint64_t folded_sqes = 0;
    for (std::uint64_t i = 0; i < 50; ++i) folded_sqes += 1 + i;
    EXPECT_EQ(s.folded[0].sqes_total, folded_sqes);
}

TEST(RingSeries, ACarriedRingIsNotSeenDoingNothing) {
    // Ring 1 holds the one place; light walks carry it, so its counts stand still. Ring 2, busy,
    // waits: ring 1 yields only once a walk has read it again and found it idle.
    RingSeries p(1);
    auto s = at(0, {{1, 0}, {2, 0}});
    p.apply(s);
    ASSERT_EQ(held(s), (std::set<std::uint64_t>{1}));
    for (double t = 1; t < 5; ++t) {
        s = at(t, {{1, 0}, {2, static_cast<std::uint64_t>(100 * t)}});
        s.rings[0].carried = true;
        p.apply(s);
        EXPECT_EQ(held(s), (std::set<std::uint64_t>{1})) << "at " << t;
    }
    s = at(5, {{1, 0}, {2, 500}});
    p.apply(s);
    EXPECT_EQ(held(s), (std::set<std::uint64_t>{2}));
}

// Requests (request tier) fold as SQEs do, per opcode: what a folded ring submitted, punted
// and completed while folded, an opcode new to a known ring counted whole, nothing from before
// the first sample, and counters that went back (a batch read) adding nothing.
TEST(RingSeries, FoldedRingsRequestsAreCountedPerOpcodeWhileFolded) {
    struct Op {
        std::uint32_t opcode;
        std::uint64_t submitted, punted = 0, forced = 0, inline_done = 0, iowq_done = 0;
    };
    const auto with_requests = [](Snapshot s, std::vector<std::vector<Op>> ops) {
        for (std::size_t i = 0; i < s.rings.size(); ++i) {
            s.rings[i].requests.has_requests = true;
            for (const auto& op : ops[i]) {
                RequestOpSnapshot o;
                o.opcode = op.opcode;
                o.submitted = op.submitted;
                o.punted = op.punted;
                o.punted_forced = op.forced;
                o.paths[0].completed = op.inline_done;
                o.paths[1].completed = op.iowq_done;
                s.rings[i].requests.ops.push_back(o);
            }
        }
        return s;
    };
    RingSeries p(1);
    auto s =
        with_requests(at(0, {{1, 100}, {2, 10, "plain", 20}}), {{{0, 100}}, {{0, 10, 4, 1, 5, 4}}});
    p.apply(s);
    ASSERT_EQ(s.folded.size(), 1u);
    EXPECT_TRUE(s.folded[0].requests.empty());  // before the first sample: not the fold's
    s = with_requests(at(1, {{1, 200}, {2, 15, "plain", 20}}),
                      {{{0, 200}}, {{0, 13, 6, 2, 6, 6}, {22, 2, 2, 2, 0, 1}}});
    p.apply(s);
    ASSERT_EQ(s.folded.size(), 1u);
    EXPECT_EQ(s.folded[0].requests,
              (std::vector<FoldedOp>{{0, 3, 1, 1, {1, 2, 0}}, {22, 2, 2, 0, {0, 1, 0}}}));
    // Opcode 0's io-wq completions read one short (a batch read): nothing subtracted.
    s = with_requests(at(2, {{1, 300}, {2, 16, "plain", 20}}),
                      {{{0, 300}}, {{0, 14, 6, 2, 8, 5}, {22, 2, 2, 2, 0, 1}}});
    p.apply(s);
    EXPECT_EQ(s.folded[0].requests,
              (std::vector<FoldedOp>{{0, 4, 1, 1, {3, 2, 0}}, {22, 2, 2, 0, {0, 1, 0}}}));
}
