// What one update indexes of its raw sample and keeps for the next (model/aggregator_index.cpp):
// the walk's order, rings held twice, ring states as rings come and go, the map keys without a
// ring, the cgroup labels and comm read again only when they change, and the recycled sample.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/unit/model/aggregator_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

namespace {

std::vector<std::uint64_t> ctxs(const Snapshot& s) {
    std::vector<std::uint64_t> out;
    for (const auto& r : s.rings) out.push_back(r.ctx);
    return out;
}

}  // namespace

TEST(AggregatorIndex, TheWalksOrderDoesNotMatter) {
    // The same rings walked in another order: listed by ctx, counting on from where they were.
    Aggregator a;
    a.update(sample(kSec, {ring(30, 10, 3, 0, 5), ring(10, 10, 4, 0, 5), ring(20, 11, 3, 0, 5)}));
    auto s = a.update(
        sample(2 * kSec, {ring(30, 10, 3, 0, 7), ring(10, 10, 4, 0, 8), ring(20, 11, 3, 0, 9)}));
    EXPECT_EQ(ctxs(s), (std::vector<std::uint64_t>{10, 20, 30}));
    s = a.update(
        sample(3 * kSec, {ring(20, 11, 3, 0, 19), ring(30, 10, 3, 0, 17), ring(10, 10, 4, 0, 18)}));
    EXPECT_EQ(ctxs(s), (std::vector<std::uint64_t>{10, 20, 30}));
    EXPECT_DOUBLE_EQ(find_ring(s, "10:4").sqe_rate, 10);
    EXPECT_DOUBLE_EQ(find_ring(s, "11:3").sqe_rate, 10);
    EXPECT_DOUBLE_EQ(find_ring(s, "10:3").sqe_rate, 10);
    EXPECT_EQ(s.rings_replaced, 0u);
}

TEST(AggregatorIndex, TheFirstHolderWalkedNamesARingHeldTwice) {
    Aggregator a;
    // Ring 5 sits in two fd tables (a fork): the walk met pid 10's first.
    auto s =
        a.update(sample(kSec, {ring(5, 10, 3, 0, 1), ring(6, 12, 3, 0, 1), ring(5, 11, 9, 0, 1)}));
    ASSERT_EQ(s.rings.size(), 2u);
    EXPECT_EQ(s.rings[0].id, "10:3");
    EXPECT_EQ(s.rings[0].pid, 10u);
    // Walked in the same order again, and then with the other holder first: the ring keeps
    // its id, and the record of this walk's first holder is read.
    for (int i = 0; i < 2; ++i) {
        s = a.update(sample((2 + i) * kSec,
                            {ring(5, 10, 3, 0, 2), ring(6, 12, 3, 0, 2), ring(5, 11, 9, 0, 2)}));
        ASSERT_EQ(s.rings.size(), 2u);
        EXPECT_EQ(s.rings[0].pid, 10u);
    }
    s = a.update(
        sample(4 * kSec, {ring(5, 11, 9, 0, 3), ring(6, 12, 3, 0, 3), ring(5, 10, 3, 0, 3)}));
    ASSERT_EQ(s.rings.size(), 2u);
    EXPECT_EQ(s.rings[0].id, "10:3");
    EXPECT_EQ(s.rings[0].pid, 11u);
    EXPECT_EQ(s.rings[0].fd, 9u);
    EXPECT_EQ(s.rings[0].sqes_total, 3u);
}

TEST(AggregatorIndex, RingsComeAndGoAroundTheOnesThatStay) {
    Aggregator a;
    a.update(sample(kSec, {ring(20, 10, 3, 0, 100), ring(40, 10, 4, 0, 100)}));
    // One before, one between, one after; ring 40 closes.
    auto s = a.update(sample(2 * kSec, {ring(50, 10, 7, 0, 1), ring(20, 10, 3, 0, 150),
                                        ring(10, 10, 5, 0, 1), ring(30, 10, 6, 0, 1)}));
    EXPECT_EQ(ctxs(s), (std::vector<std::uint64_t>{10, 20, 30, 50}));
    EXPECT_EQ(find_ring(s, "10:3").sqes_total, 150u);
    EXPECT_DOUBLE_EQ(find_ring(s, "10:3").sqe_rate, 50);
    EXPECT_DOUBLE_EQ(find_ring(s, "10:5").sqe_rate, 0);  // new: no rate yet
    // An incomplete walk keeps the rings it did not reach, and meets a new one meanwhile.
    RawSample partial = sample(3 * kSec, {ring(25, 10, 8, 0, 1), ring(50, 10, 7, 0, 3)});
    partial.walk_complete = false;
    s = a.update(partial);
    EXPECT_EQ(ctxs(s), (std::vector<std::uint64_t>{25, 50}));
    s = a.update(sample(4 * kSec, {ring(10, 10, 5, 0, 11), ring(20, 10, 3, 0, 250),
                                   ring(25, 10, 8, 0, 2), ring(30, 10, 6, 0, 1)}));
    EXPECT_EQ(ctxs(s), (std::vector<std::uint64_t>{10, 20, 25, 30}));
    EXPECT_EQ(find_ring(s, "10:3").sqes_total, 250u);  // carried across the partial walk
    EXPECT_EQ(find_ring(s, "10:5").sqes_total, 11u);
    EXPECT_EQ(s.rings_replaced, 0u);
}

TEST(AggregatorIndex, MapKeysWithoutARingAreFoundInAnyOrder) {
    Aggregator a;
    RawSample raw = sample(kSec, {ring(30, 10, 3, 0, 0), ring(10, 10, 4, 0, 0)});
    raw.births = {{30, 1}, {25, 2}, {10, 3}, {5, 4}, {99, 5}};
    a.update(raw);
    EXPECT_TRUE(a.cleanup().rings.empty());  // the second chance
    raw.mono_ns = 2 * kSec;
    raw.births = {{99, 5}, {5, 4}, {10, 3}, {30, 1}, {25, 2}};
    a.update(raw);
    EXPECT_EQ(a.cleanup().rings, (std::vector<std::uint64_t>{5, 25, 99}));
}

TEST(AggregatorIndex, LabelsAndCommFollowTheirSources) {
    const std::string id(64, 'c');
    Aggregator a;
    auto r = ring(1, 10, 3, 0, 0);
    r.cgroup_id = 7;
    RawSample raw = sample(kSec, {r});
    raw.cgroup_paths = {{7, "/docker/" + id}};
    auto s = a.update(raw);
    EXPECT_EQ(s.rings[0].cgroup.container_id, "docker://" + id);
    EXPECT_EQ(s.rings[0].comm, "app");
    // The cgroup renamed, the process renamed itself.
    std::strcpy(r.comm, "app-worker");
    raw = sample(2 * kSec, {r});
    raw.cgroup_paths = {{7, "/system.slice/app.service"}};
    s = a.update(raw);
    EXPECT_EQ(s.rings[0].cgroup.cgroup, "/system.slice/app.service");
    EXPECT_EQ(s.rings[0].cgroup.container_id, "");
    EXPECT_EQ(s.rings[0].comm, "app-worker");
    EXPECT_EQ(s.processes[0].comm, "app-worker");
    // A sample without the id's path: no labels.
    raw = sample(3 * kSec, {r});
    s = a.update(raw);
    EXPECT_EQ(s.rings[0].cgroup.cgroup, "");
}

TEST(AggregatorIndex, ProcessesAreListedByPidOnceEach) {
    Aggregator a;
    auto sq = ring(4, 30, 3, kSqpoll, 0, 50);
    sq.sq_tgid = 5;  // the thread's own process holds no ring
    std::strcpy(sq.sq_comm, "owner");
    const auto s = a.update(sample(kSec, {ring(3, 20, 3, 0, 0), sq, ring(1, 20, 4, 0, 0),
                                          ring(2, 30, 4, 0, 0), ring(5, 20, 5, 0, 0)}));
    ASSERT_EQ(s.processes.size(), 3u);
    EXPECT_EQ(s.processes[0].pid, 5u);
    EXPECT_EQ(s.processes[0].comm, "owner");
    EXPECT_EQ(s.processes[1].pid, 20u);
    EXPECT_EQ(s.processes[2].pid, 30u);
    EXPECT_EQ(processes_of(s).size(), 3u);
}

TEST(AggregatorIndex, ARecycledSampleIsEmptyAndKeepsItsBuffers) {
    Aggregator a;
    RawSample raw = a.take_raw();
    for (std::uint64_t i = 1; i <= 1000; ++i) raw.rings.push_back(ring(i, 10, 2 + i, 0, 0));
    raw.mono_ns = kSec;
    raw.births = {{1, 2}};
    raw.walk_complete = false;
    raw.cgroup_paths = {{1, "/"}};
    a.update(raw);
    const auto* records = raw.rings.data();
    a.recycle(std::move(raw));
    RawSample next = a.take_raw();
    EXPECT_TRUE(next.rings.empty());
    EXPECT_GE(next.rings.capacity(), 1000u);
    EXPECT_EQ(next.rings.data(), records);
    EXPECT_TRUE(next.births.empty());
    EXPECT_TRUE(next.cgroup_paths.empty());
    EXPECT_TRUE(next.walk_complete);
    EXPECT_EQ(next.mono_ns, 0u);
}
