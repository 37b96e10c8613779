// The last full walk's order as light walks follow it (collect/walk_order.hpp), without a map.
#include "collect/walk_order.hpp"

#include <gtest/gtest.h>

#include <vector>

using namespace iouscope;

namespace {

iou_ring_record rec(std::uint64_t ctx, std::uint32_t flags) {
    iou_ring_record r{};
    r.ctx = ctx;
    r.setup_flags = flags;
    return r;
}

iou_created_ring born(std::uint64_t ctx) {
    iou_created_ring c{};
    c.ctx = ctx;
    return c;
}

}  // namespace

std::vector<std::uint64_t> entries(const WalkOrder& o) {
    const auto e = o.entries();
    return {e.begin(), e.end()};
}

TEST(WalkOrder, EntriesAreTheRingsInWalkOrderWithIdlePlainOnesMarked) {
    WalkOrder o(-1, 16);
    std::vector<iou_ring_record> walk = {rec(0x3000, 0), rec(0x1000, IOU_SETUP_SQPOLL),
                                         rec(0x2000, IOU_SETUP_IOPOLL), rec(0x3000, 0),
                                         rec(0x4000, 0)};
    ASSERT_TRUE(o.learn(walk));
    EXPECT_EQ(o.known(), 5u);
    EXPECT_EQ(entries(o), (std::vector<std::uint64_t>{0x3000, 0x1000, 0x2000, 0x3000, 0x4000}))
        << "nothing is known idle at the first full walk";
    walk[4].sq_head = walk[4].cq_tail = 7;  // 0x4000 did something over the period
    ASSERT_TRUE(o.learn(walk));
    EXPECT_EQ(entries(o), (std::vector<std::uint64_t>{0x3001, 0x1000, 0x2000, 0x3001, 0x4000}));
    ASSERT_TRUE(o.learn(walk));
    EXPECT_EQ(entries(o), (std::vector<std::uint64_t>{0x3001, 0x1000, 0x2000, 0x3001, 0x4001}));
}

TEST(WalkOrder, RingsPastTheCapacityAreLeftOut) {
    WalkOrder o(-1, 2);
    const std::vector<iou_ring_record> walk = {rec(0x1000, 0), rec(0x2000, 0), rec(0x3000, 0)};
    EXPECT_TRUE(o.learn(walk));
    EXPECT_EQ(o.known(), 2u);
}

TEST(WalkOrder, ANewRingAtAKnownAddressIsReadInFullUntilTheNextFullWalk) {
    WalkOrder o(-1, 16);
    const std::vector<iou_ring_record> walk = {rec(0x1000, 0), rec(0x2000, 0), rec(0x1000, 0)};
    ASSERT_TRUE(o.learn(walk));
    ASSERT_TRUE(o.learn(walk));
    const std::vector<iou_created_ring> created = {born(0x1000), born(0x9000)};
    o.forget(created);
    EXPECT_EQ(entries(o), (std::vector<std::uint64_t>{0x1000, 0x2001, 0x1000}));
    ASSERT_TRUE(o.learn(walk));
    EXPECT_EQ(entries(o)[0], 0x1001u);
    o.clear();
    EXPECT_EQ(o.known(), 0u);
}

TEST(WalkOrder, AFullWalkWritesOnlyTheEntriesThatChanged) {
    WalkOrder o(-1, 16);
    std::vector<iou_ring_record> walk = {rec(0x1000, 0), rec(0x2000, 0), rec(0x3000, 0),
                                         rec(0x4000, 0)};
    ASSERT_TRUE(o.learn(walk));
    EXPECT_EQ(o.written(), 4u);
    ASSERT_TRUE(o.learn(walk));
    EXPECT_EQ(o.written(), 8u) << "each now known idle";
    ASSERT_TRUE(o.learn(walk));
    EXPECT_EQ(o.written(), 8u) << "the same order again";
    walk.erase(walk.begin() + 1);  // 0x2000 closed: the entries after it move up
    ASSERT_TRUE(o.learn(walk));
    EXPECT_EQ(o.written(), 10u);
    EXPECT_EQ(entries(o), (std::vector<std::uint64_t>{0x1001, 0x3001, 0x4001}));
    const std::vector<iou_created_ring> created = {born(0x3000)};
    o.forget(created);
    EXPECT_EQ(o.written(), 11u);
    ASSERT_TRUE(o.learn(walk));
    EXPECT_EQ(o.written(), 12u) << "the entry forget() changed, back";
}

TEST(WalkOrder, ANewRingAtAnIdleRingsAddressAndCountIsNotIdle) {
    WalkOrder o(-1, 16);
    std::vector<iou_ring_record> walk = {rec(0x1000, 0)};
    walk[0].born_ns = 100;
    walk[0].sq_head = walk[0].cq_tail = 4;
    ASSERT_TRUE(o.learn(walk));
    // The ring closed; a new one took its address and, when the next full walk read it, had
    // done as many NOPs as the old one did in all.
    walk[0].born_ns = 200;
    ASSERT_TRUE(o.learn(walk));
    EXPECT_EQ(entries(o), (std::vector<std::uint64_t>{0x1000}));
    ASSERT_TRUE(o.learn(walk));
    EXPECT_EQ(entries(o), (std::vector<std::uint64_t>{0x1001}));
}
