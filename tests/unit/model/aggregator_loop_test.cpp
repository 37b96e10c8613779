// The SQ thread's loop as the deep tier sees it (model/aggregator_loop.cpp): loop passes.
// Work gaps are tested with the idle model (advisor_idle_model_test.cpp) and alone
// (aggregator_stages_test.cpp).
#include <gtest/gtest.h>

#include "tests/unit/model/aggregator_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

TEST(Aggregator, LoopPassesGiveRatesOverTheLastIntervalOnly) {
    Aggregator a;
    auto r = ring(1, 10, 3, kSqpoll, 0, 50);
    auto raw = sample(kSec, {r});
    iou_sq_passes p{};
    p.passes = 1000;
    p.busy_passes = 100;
    p.work_ns = kSec / 4;
    raw.passes = {{50, p}};
    auto s = a.update(raw);
    ASSERT_EQ(s.threads.size(), 1u);
    EXPECT_TRUE(s.threads[0].has_passes);
    EXPECT_EQ(s.threads[0].loop_passes, 1000u);
    EXPECT_EQ(s.threads[0].busy_passes, 100u);
    EXPECT_DOUBLE_EQ(s.threads[0].pass_work_seconds, 0.25);
    // No previous sample: no rate rather than everything since attach divided by one interval.
    EXPECT_DOUBLE_EQ(s.threads[0].pass_rate, 0);
    EXPECT_DOUBLE_EQ(s.threads[0].empty_pass_ratio, 0);

    raw = sample(3 * kSec, {r});
    p.passes = 5000;       // +4000 in 2 s
    p.busy_passes = 1100;  // +1000 of them busy
    raw.passes = {{50, p}};
    s = a.update(raw);
    EXPECT_DOUBLE_EQ(s.threads[0].pass_rate, 2000);
    EXPECT_DOUBLE_EQ(s.threads[0].empty_pass_ratio, 0.75);

    // Without the probe's entry the thread has no pass figures at all.
    s = a.update(sample(4 * kSec, {r}));
    EXPECT_FALSE(s.threads[0].has_passes);
}
