#include "model/counters.hpp"

#include <gtest/gtest.h>

#include <vector>

using namespace iouscope;

TEST(WrappingCounter32, FirstObservationIsTheCountSinceCreation) {
    WrappingCounter32 c;
    EXPECT_EQ(c.observe(1234), 1234u);
    EXPECT_EQ(c.observe(1300), 1300u);
}

TEST(WrappingCounter32, CarriesAcrossTheWrap) {
    WrappingCounter32 c;
    c.observe(0xFFFFFFF0u);
    EXPECT_EQ(c.observe(0x10u), 0xFFFFFFF0ull + 0x20);
    // A second wrap keeps adding: 2^32 + 0x10 + 2^32.
    c.observe(0xFFFFFFFFu);
    EXPECT_EQ(c.observe(0x0Fu), (1ull << 33) + 0x0F);
}

TEST(WrappingCounter32, UnchangedValueAddsNothing) {
    WrappingCounter32 c;
    c.observe(5);
    EXPECT_EQ(c.observe(5), 5u);
}

TEST(JainFairness, EqualAllocationsAreOne) {
    std::vector<double> x{10, 10, 10, 10};
    EXPECT_DOUBLE_EQ(jain_fairness(x), 1.0);
}

TEST(JainFairness, OneTakesAllIsOneOverN) {
    std::vector<double> x{100, 0, 0, 0};
    EXPECT_DOUBLE_EQ(jain_fairness(x), 0.25);
}

TEST(JainFairness, KnownValue) {
    // (1+3)^2 / (2 * (1+9)) = 16/20
    std::vector<double> x{1, 3};
    EXPECT_DOUBLE_EQ(jain_fairness(x), 0.8);
}

TEST(JainFairness, EmptyAndAllZeroAreOne) {
    EXPECT_DOUBLE_EQ(jain_fairness({}), 1.0);
    std::vector<double> z{0, 0};
    EXPECT_DOUBLE_EQ(jain_fairness(z), 1.0);
}

TEST(CpuSplit, WorkTimeIsBoundedByCpu) {
    auto s = split_with_work_time(1000, 300);
    EXPECT_EQ(s.work_ns, 300u);
    EXPECT_EQ(s.spin_ns, 700u);
    s = split_with_work_time(1000, 1500);
    EXPECT_EQ(s.work_ns, 1000u);
    EXPECT_EQ(s.spin_ns, 0u);
}

TEST(CpuSplit, EstimateWithoutProgressIsAllSpin) {
    auto s = estimate_split(5000, 0, 100, false);
    EXPECT_EQ(s.work_ns, 0u);
    EXPECT_EQ(s.spin_ns, 5000u);
}

TEST(CpuSplit, EstimateChargesIdleBeforeEachSleep) {
    auto s = estimate_split(10'000, 3, 1'000, true);
    EXPECT_EQ(s.spin_ns, 3'000u);
    EXPECT_EQ(s.work_ns, 7'000u);
    // More sleeps than CPU can explain: all spin, no overflow.
    s = estimate_split(10'000, ~0ull, 1'000'000, true);
    EXPECT_EQ(s.spin_ns, 10'000u);
    EXPECT_EQ(s.work_ns, 0u);
}

TEST(Log2Histogram, CumulativeFromFirstBucket) {
    std::vector<std::uint64_t> h{1, 2, 3, 4, 5};
    auto c = log2_to_cumulative(h, 1);
    // Bounds 2^(i+1) for i = 1..3; the last bucket is open and only counted in the total.
    ASSERT_EQ(c.upper_bounds, (std::vector<double>{4, 8, 16}));
    EXPECT_EQ(c.cumulative, (std::vector<std::uint64_t>{3, 6, 10}));
    EXPECT_EQ(c.count, 15u);
}

TEST(Log2Histogram, Quantiles) {
    std::vector<std::uint64_t> h(8, 0);
    h[3] = 100;  // all in [8, 16)
    EXPECT_DOUBLE_EQ(*log2_quantile(h, 0.5), 12.0);
    EXPECT_DOUBLE_EQ(*log2_quantile(h, 1.0), 16.0);
    std::vector<std::uint64_t> empty(8, 0);
    EXPECT_FALSE(log2_quantile(empty, 0.5).has_value());
}
