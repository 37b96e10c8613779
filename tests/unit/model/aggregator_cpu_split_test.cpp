// An SQ thread's CPU split (model/aggregator_cpu_split.cpp): the kernel's work_time, the
// estimate, the spin model, the deep tier's work sources side by side.
#include <gtest/gtest.h>

#include "tests/unit/model/aggregator_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

TEST(Aggregator, KernelWorkTimeSplitsCpu) {
    Aggregator a;
    a.set_hz(250);
    auto r = ring(1, 10, 3, kSqpoll, 0, 50);
    r.caps |= IOU_CAP_WORK_TIME;
    r.sq_runtime_ns = 2 * kSec;
    r.work_time_us = 500'000;
    RawSample raw = sample(kSec, {r});
    raw.kernel.work_time_per_thread = true;
    auto s = a.update(raw);
    ASSERT_EQ(s.threads.size(), 1u);
    const auto& t = s.threads[0];
    EXPECT_EQ(t.work_source, WorkSource::kernel);
    EXPECT_DOUBLE_EQ(t.cpu_seconds, 2.0);
    EXPECT_DOUBLE_EQ(t.work_seconds, 0.5);
    EXPECT_DOUBLE_EQ(t.spin_seconds, 1.5);
    EXPECT_DOUBLE_EQ(t.idle_setting_seconds, 1.0);
    // The estimate is kept beside the kernel's figure (no SQEs yet: it calls everything spin).
    std::map<WorkSource, double> by(t.work_by_source_seconds.begin(),
                                    t.work_by_source_seconds.end());
    EXPECT_DOUBLE_EQ(by.at(WorkSource::kernel), 0.5);
    EXPECT_DOUBLE_EQ(by.at(WorkSource::estimate), 0.0);
}

TEST(Aggregator, ProcessWideWorkTimeFallsBackToTheEstimate) {
    Aggregator a;
    a.set_hz(250);
    auto r = ring(1, 10, 3, kSqpoll, 0, 50);
    r.caps |= IOU_CAP_WORK_TIME;
    r.work_time_us = 123;
    r.sq_runtime_ns = kSec;
    RawSample raw = sample(kSec, {r});
    raw.kernel.work_time_per_thread = false;
    auto s = a.update(raw);
    EXPECT_EQ(s.threads[0].work_source, WorkSource::estimate);
    // No SQEs yet: everything so far was spinning.
    EXPECT_DOUBLE_EQ(s.threads[0].spin_seconds, 1.0);
    EXPECT_DOUBLE_EQ(s.threads[0].work_seconds, 0.0);

    // Next second: 0.4 s CPU, progress, two sleeps after 0.1 s idle and half a 4 ms tick each
    // -> 0.204 spin, 0.196 work.
    r.sq_head = r.cq_tail = r.sq_tail = 100;
    r.sq_runtime_ns = kSec + 400'000'000;
    r.sq_thread_idle = 25;  // 100 ms at HZ=250
    RawSample raw2 = sample(2 * kSec, {r});
    iou_sched_state ss{};
    ss.sleeps = 2;
    raw2.sched.emplace_back(50, ss);
    s = a.update(raw2);
    EXPECT_NEAR(s.threads[0].spin_seconds, 1.204, 1e-9);
    EXPECT_NEAR(s.threads[0].work_seconds, 0.196, 1e-9);
    EXPECT_NEAR(s.threads[0].cpu_util, 0.4, 1e-9);
}

TEST(Aggregator, CountersStayMonotonicWhenWorkTimeRunsAhead) {
    Aggregator a;
    auto r = ring(1, 10, 3, kSqpoll, 0, 50);
    r.caps |= IOU_CAP_WORK_TIME;
    r.sq_runtime_ns = kSec;
    r.work_time_us = 400'000;
    RawSample raw = sample(kSec, {r});
    raw.kernel.work_time_per_thread = true;
    auto s1 = a.update(raw);
    // work_time updated before sum_exec_runtime caught up: work may not exceed CPU.
    r.work_time_us = 1'200'000;
    r.sq_runtime_ns = kSec + 100'000'000;
    raw = sample(2 * kSec, {r});
    raw.kernel.work_time_per_thread = true;
    auto s2 = a.update(raw);
    EXPECT_GE(s2.threads[0].work_seconds, s1.threads[0].work_seconds);
    EXPECT_GE(s2.threads[0].spin_seconds, 0.0);
    EXPECT_LE(s2.threads[0].work_seconds, s2.threads[0].cpu_seconds + 1e-12);
    EXPECT_GE(s2.threads[0].spin_seconds + 1e-12, s1.threads[0].spin_seconds);
}

TEST(AggregatorHz, NoSplitBeforeHzIsKnownThenTheWholeHistory) {
    Aggregator a;
    auto r = ring(1, 10, 3, kSqpoll, 500, 50);
    r.caps |= IOU_CAP_IDLE_IN_SQD;
    r.jiffies = 1000;
    r.sq_runtime_ns = 10 * kSec;
    r.sq_nvcsw = 4;
    auto s = a.update(sample(kSec, {r}));
    ASSERT_EQ(s.threads.size(), 1u);
    // Before: idle read as 0 s, so all ten seconds were booked as work.
    EXPECT_FALSE(s.threads[0].split_known);
    EXPECT_DOUBLE_EQ(s.threads[0].work_seconds, 0);
    EXPECT_DOUBLE_EQ(s.threads[0].spin_seconds, 0);
    EXPECT_EQ(s.threads[0].spin_model, "");

    r.jiffies = 1250;
    r.sq_runtime_ns = 11 * kSec;
    s = a.update(sample(2 * kSec, {r}));
    ASSERT_EQ(a.hz(), 250u);
    const auto& t = s.threads[0];
    EXPECT_TRUE(t.split_known);
    EXPECT_EQ(t.spin_model, "after_last_work");
    // Four sleeps, each after 1 s of idle and half a 4 ms tick: 4.008 s of the 11 s spun.
    EXPECT_NEAR(t.spin_seconds, 4.008, 1e-9);
    EXPECT_NEAR(t.work_seconds, 6.992, 1e-9);
    EXPECT_DOUBLE_EQ(t.work_util, 0);  // this interval carries the history: no rate from it
    EXPECT_NEAR(t.cpu_util, 1.0, 1e-9);
}

TEST(AggregatorSpinModel, NamedAfterTheLoopTheKernelRuns) {
    auto r = ring(1, 10, 3, kSqpoll, 0, 50);
    r.sq_thread_idle = 10;
    EXPECT_EQ(spin_model(r, 100).name, "after_wakeup");  // 5.10: idle only in the ctx
    EXPECT_EQ(spin_model(r, 100).spin_per_sleep_ns, 105'000'000u);
    r.caps |= IOU_CAP_IDLE_IN_SQD;
    EXPECT_EQ(spin_model(r, 100).name, "after_last_work");
    EXPECT_FALSE(spin_model(r, 0).known);
    r.sq_idle_unit = IOU_IDLE_NS;
    r.sq_thread_idle = 50'000;
    EXPECT_EQ(spin_model(r, 0).name, "ns");
    EXPECT_EQ(spin_model(r, 0).spin_per_sleep_ns, 50'000u);  // no tick rounding
}

TEST(AggregatorWorkSource, DeepTierReplacesTheEstimateAndEverySourceIsShown) {
    // One thread, one ring. Interval 2: 1 s of CPU, SQEs flowing, no sleeps: the estimate
    // calls all of it work. The loop passes measured 0.3 s of work; io_submit_sqes 0.2 s.
    for (bool passes : {true, false}) {
        Aggregator a;
        a.set_hz(250);
        auto r = ring(1, 10, 3, kSqpoll, 0, 50);
        r.caps |= IOU_CAP_IDLE_IN_SQD;
        RawSample raw = sample(kSec, {r});
        raw.ring_turns = passes;
        raw.submit_probe = true;
        iou_sq_passes p{};
        iou_ring_work w{};
        if (passes) raw.passes = {{50, p}};
        raw.ring_work = {{1, w}};
        a.update(raw);

        r.sq_head = r.sq_tail = r.cq_tail = 5000;
        r.sq_runtime_ns = kSec;
        raw = sample(2 * kSec, {r});
        raw.ring_turns = passes;
        raw.submit_probe = true;
        p.work_ns = 300'000'000;
        w.submit_ns = 200'000'000;
        if (passes) raw.passes = {{50, p}};
        raw.ring_work = {{1, w}};
        auto s = a.update(raw);
        const auto& t = s.threads[0];
        const double want = passes ? 0.3 : 0.2;
        EXPECT_EQ(t.work_source, passes ? WorkSource::loop_passes : WorkSource::submit_and_poll);
        EXPECT_NEAR(t.work_seconds, want, 1e-9);
        EXPECT_NEAR(t.spin_seconds, 1.0 - want, 1e-9);
        std::map<WorkSource, double> by(t.work_by_source_seconds.begin(),
                                        t.work_by_source_seconds.end());
        EXPECT_NEAR(by.at(WorkSource::estimate), 1.0, 1e-9);  // what it used to report
        EXPECT_NEAR(by.at(WorkSource::submit_and_poll), 0.2, 1e-9);
        EXPECT_EQ(by.count(WorkSource::loop_passes), passes ? 1u : 0u);
        EXPECT_EQ(by.count(WorkSource::kernel), 0u);
    }
}

TEST(AggregatorWorkSource, TimedLoopPassesRuleOverTheKernelsTickSampledWorkTime) {
    Aggregator a;
    a.set_hz(250);
    auto r = ring(1, 10, 3, kSqpoll, 0, 50);
    r.caps |= IOU_CAP_WORK_TIME | IOU_CAP_IDLE_IN_SQD;
    RawSample raw = sample(kSec, {r});
    raw.kernel.work_time_per_thread = true;
    raw.ring_turns = true;
    a.update(raw);
    r.sq_head = r.sq_tail = r.cq_tail = 100;
    r.sq_runtime_ns = kSec;
    r.work_time_us = 50'000;  // the tick saw 50 ms
    raw = sample(2 * kSec, {r});
    raw.kernel.work_time_per_thread = true;
    raw.ring_turns = true;
    iou_sq_passes p{};
    p.work_ns = 200'000'000;  // the passes took 200 ms
    raw.passes = {{50, p}};
    auto s = a.update(raw);
    const auto& t = s.threads[0];
    EXPECT_EQ(t.work_source, WorkSource::loop_passes);
    EXPECT_NEAR(t.work_seconds, 0.2, 1e-9);
    std::map<WorkSource, double> by(t.work_by_source_seconds.begin(),
                                    t.work_by_source_seconds.end());
    EXPECT_NEAR(by.at(WorkSource::kernel), 0.05, 1e-9);
    EXPECT_NEAR(by.at(WorkSource::loop_passes), 0.2, 1e-9);
}

// Seeds patch 004: work_time counts only once a ring sets IORING_SETUP_SQTHREAD_STATS, which may
// come long after the thread started. The split carries on from where the estimate left it,
// instead of waiting (frozen) until work_time overtakes the estimate's history.
TEST(Aggregator, KernelWorkTimeTurnedOnLateContinuesTheSplit) {
    Aggregator a;
    a.set_hz(250);
    auto r = ring(1, 10, 3, kSqpoll, 0, 50);  // no IOU_CAP_WORK_TIME: stats off
    r.sq_runtime_ns = kSec;
    auto next = [&](std::uint64_t t) {
        RawSample raw = sample(t, {r});
        raw.kernel.work_time_per_thread = true;
        return raw;
    };
    auto s = a.update(next(kSec));
    // The estimate, as in ProcessWideWorkTimeFallsBackToTheEstimate: 0.196 s of work.
    r.sq_head = r.cq_tail = r.sq_tail = 100;
    r.sq_runtime_ns = kSec + 400'000'000;
    r.sq_thread_idle = 25;
    RawSample raw2 = next(2 * kSec);
    iou_sched_state ss{};
    ss.sleeps = 2;
    raw2.sched.emplace_back(50, ss);
    s = a.update(raw2);
    ASSERT_EQ(s.threads[0].work_source, WorkSource::estimate);
    EXPECT_NEAR(s.threads[0].work_seconds, 0.196, 1e-9);

    // A ring turns the stats on: work_time starts from 0 and counts 0.1 s of the next 0.5 s.
    r.caps |= IOU_CAP_WORK_TIME;
    r.work_time_us = 100'000;
    r.sq_runtime_ns = kSec + 900'000'000;
    RawSample raw3 = next(3 * kSec);
    raw3.sched.emplace_back(50, ss);
    s = a.update(raw3);
    EXPECT_EQ(s.threads[0].work_source, WorkSource::kernel);
    EXPECT_NEAR(s.threads[0].work_seconds, 0.296, 1e-9);
    EXPECT_NEAR(s.threads[0].spin_seconds, 1.604, 1e-9);
    EXPECT_NEAR(s.threads[0].work_util, 0.1, 1e-9);

    // And keeps counting: 0.5 s more of work_time is 0.5 s more work.
    r.work_time_us = 600'000;
    r.sq_runtime_ns = 2 * kSec + 900'000'000;
    RawSample raw4 = next(4 * kSec);
    raw4.sched.emplace_back(50, ss);
    s = a.update(raw4);
    EXPECT_NEAR(s.threads[0].work_seconds, 0.796, 1e-9);
    EXPECT_NEAR(s.threads[0].spin_seconds, 2.104, 1e-9);
    EXPECT_NEAR(s.threads[0].work_util, 0.5, 1e-9);
}
