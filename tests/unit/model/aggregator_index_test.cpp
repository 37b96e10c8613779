// What the aggregator keeps from one sample for the next: the raw sample it hands back for the
// next read (Aggregator::take_raw, model/aggregator.cpp).
#include <gtest/gtest.h>

#include "tests/unit/model/aggregator_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

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
