// The `from` snapshot's index (model/advisor_window.cpp, FromIndex): threads by tid and rings by
// ctx, in a snapshot listed in that order (the aggregator's) or not, and the rings of a whole
// snapshot matched in one walk.
#include "model/advisor_window.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "tests/unit/model/advisor_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;
using iouscope::advisor::FromIndex;

TEST(FromIndex, FindsThreadsAndRingsInAnyOrder) {
    Snapshot s = snap(0);
    s.threads = {thread(9, 1, 0, 0), thread(3, 1, 0, 0), thread(5, 1, 0, 0)};
    // Ctx 0x20 twice: the first listed wins, as it did in a map.
    s.rings = {ring("1:3", 0x30, 9, 1), ring("1:4", 0x20, 3, 2), ring("1:5", 0x10, 5, 3),
               ring("1:6", 0x20, 5, 4)};
    for (int sorted = 0; sorted < 2; ++sorted) {
        if (sorted) {
            std::stable_sort(s.threads.begin(), s.threads.end(),
                             [](const auto& a, const auto& b) { return a.tid < b.tid; });
            std::stable_sort(s.rings.begin(), s.rings.end(),
                             [](const auto& a, const auto& b) { return a.ctx < b.ctx; });
        }
        const FromIndex ix(s);
        ASSERT_NE(ix.thread(5), nullptr);
        EXPECT_EQ(ix.thread(5)->tid, 5);
        EXPECT_EQ(ix.thread(4), nullptr);
        const RingSnapshot* r = ix.ring(ring("1:4", 0x20, 3, 0));
        ASSERT_NE(r, nullptr);
        EXPECT_EQ(r->sqes_total, 2u);
        // Another ring at a reused address, and an address never seen.
        EXPECT_EQ(ix.ring(ring("1:6", 0x20, 5, 0)), nullptr);
        EXPECT_EQ(ix.ring(ring("1:7", 0x40, 5, 0)), nullptr);
    }
}

TEST(FromIndex, MatchingAWholeSnapshotAnswersAsOneByOne) {
    std::mt19937 rng(7);
    for (int sorted = 0; sorted < 2; ++sorted) {
        Snapshot from = snap(0), to = snap(10);
        for (std::uint64_t i = 0; i < 300; ++i) {
            const std::uint64_t ctx = 0x1000 + 0x40 * (rng() % 200);  // repeats, as reused
            from.rings.push_back(ring("1:" + std::to_string(i), ctx, 5, i));
        }
        if (sorted)
            std::stable_sort(from.rings.begin(), from.rings.end(),
                             [](const auto& a, const auto& b) { return a.ctx < b.ctx; });
        // Half of them a ring of `from` again (not always the first at its address), half new.
        for (std::uint64_t i = 0; i < 150; ++i) {
            const RingSnapshot& old = from.rings[rng() % from.rings.size()];
            const std::uint64_t ctx = i % 2 ? 0x1000 + 0x40 * (rng() % 220) : old.ctx;
            to.rings.push_back(ring(old.id, ctx, 5, 0));
        }
        std::stable_sort(to.rings.begin(), to.rings.end(),
                         [](const auto& a, const auto& b) { return a.ctx < b.ctx; });
        std::vector<const RingSnapshot*> now;
        for (const auto& r : to.rings) now.push_back(&r);
        const FromIndex one_by_one(from), matched(from);
        matched.match(now);
        std::size_t found = 0;
        for (const auto* r : now) {
            EXPECT_EQ(matched.ring(*r), one_by_one.ring(*r)) << r->id;
            found += one_by_one.ring(*r) != nullptr;
        }
        EXPECT_GT(found, 0u);
    }
}
