// What the scheduler says of an SQ thread (model/aggregator_sched.cpp): sleeps in progress, wake
// latency, blocks, CPU time at the sample's instant, and what the scheduler gate is told.
#include <gtest/gtest.h>

#include "tests/unit/model/aggregator_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

TEST(Aggregator, SleepIncludesTheSleepInProgress) {
    Aggregator a;
    RawSample raw = sample(10 * kSec, {ring(1, 10, 3, kSqpoll, 0, 50)});
    iou_sched_state ss{};
    ss.sleeps = 3;
    ss.wakeups = 2;
    ss.sleep_ns = 2 * kSec;
    ss.sleep_start_ns = 9 * kSec;
    ss.lat_hist[12] = 2;  // two latencies in [4096, 8192) ns
    ss.lat_count = 2;
    ss.lat_sum_ns = 10'000;
    raw.sched.emplace_back(50, ss);
    auto s = a.update(raw);
    const auto& t = s.threads[0];
    EXPECT_DOUBLE_EQ(t.sleep_seconds, 3.0);
    EXPECT_EQ(t.sleeps, 3u);
    EXPECT_EQ(t.wakeups, 2u);
    EXPECT_EQ(t.wake_latency.count, 2u);
    EXPECT_DOUBLE_EQ(t.wake_latency.sum_s, 10e-6);
    // The first exported bound is 2^10 ns; the two latencies are counted from 8192 ns on.
    ASSERT_FALSE(t.wake_latency.upper_bounds_s.empty());
    EXPECT_DOUBLE_EQ(t.wake_latency.upper_bounds_s[0], 1024e-9);
    EXPECT_EQ(t.wake_latency.cumulative[2], 0u);  // le 4096 ns
    EXPECT_EQ(t.wake_latency.cumulative[3], 2u);  // le 8192 ns
}

TEST(Aggregator, WakeLatencyQuantilesCoverOnlyTheLastInterval) {
    Aggregator a;
    iou_sched_state ss{};
    ss.lat_hist[20] = 100;  // ~1 ms, all before the second sample
    RawSample r1 = sample(kSec, {ring(1, 10, 3, kSqpoll, 0, 50)});
    r1.sched.emplace_back(50, ss);
    auto s = a.update(r1);
    EXPECT_GT(s.threads[0].wake_p50_seconds, 1e-3);
    ss.lat_hist[10] = 10;  // ten new ~1.5 us latencies
    RawSample r2 = sample(2 * kSec, {ring(1, 10, 3, kSqpoll, 0, 50)});
    r2.sched.emplace_back(50, ss);
    s = a.update(r2);
    EXPECT_GE(s.threads[0].wake_p99_seconds, 1024e-9);
    EXPECT_LE(s.threads[0].wake_p99_seconds, 2048e-9);
    RawSample r3 = sample(3 * kSec, {ring(1, 10, 3, kSqpoll, 0, 50)});
    r3.sched.emplace_back(50, ss);
    s = a.update(r3);
    EXPECT_EQ(s.threads[0].wake_p50_seconds, -1);  // no wakeups in this interval
}

TEST(AggregatorSleeps, BlocksAreCountedApartAndChargeNoSpin) {
    Aggregator a;
    a.set_hz(1000);
    auto r = ring(1, 10, 3, kSqpoll, 0, 50);
    r.caps |= IOU_CAP_IDLE_IN_SQD;
    r.sq_thread_idle = 100;  // 100 ms
    a.update(sample(kSec, {r}));

    // One second with 0.9 s of CPU, progress, one idle sleep and 40 waits on sqd->lock: the
    // 40 blocks would have been charged 4 s of spin (all the CPU) when every voluntary
    // switch counted as a sleep.
    r.sq_head = r.sq_tail = r.cq_tail = 1000;
    r.sq_runtime_ns = 900'000'000;
    RawSample raw = sample(2 * kSec, {r});
    iou_sched_state ss{};
    ss.sleeps = 1;
    ss.blocks = 40;
    ss.sleep_ns = 50'000'000;
    ss.block_ns = 30'000'000;
    ss.sleep_start_ns = 2 * kSec - 10'000'000;
    ss.blocked = 1;  // blocked right now, for 10 ms so far
    raw.sched.emplace_back(50, ss);
    auto s = a.update(raw);
    const auto& t = s.threads[0];
    EXPECT_EQ(t.sleeps, 1u);
    EXPECT_EQ(t.blocks, 40u);
    EXPECT_NEAR(t.sleep_seconds, 0.05, 1e-9);
    EXPECT_NEAR(t.block_seconds, 0.04, 1e-9);
    EXPECT_NEAR(t.spin_seconds, 0.1005, 1e-9);  // one sleep: 100 ms and half a 1 ms tick
    EXPECT_NEAR(t.work_seconds, 0.7995, 1e-9);
    EXPECT_NEAR(t.block_rate, 40.0, 1e-9);
}

TEST(AggregatorCpu, RunningTimeNotYetChargedCountsAndCpuNeverGoesBack) {
    Aggregator a;
    a.set_hz(250);
    auto r = ring(1, 10, 3, kSqpoll, 0, 50);
    r.caps |= IOU_CAP_RUNNING;
    r.sq_runtime_ns = 5 * kSec;     // the last remote tick's figure
    r.sq_running_ns = 700'000'000;  // run since then
    auto s = a.update(sample(kSec, {r}));
    EXPECT_NEAR(s.threads[0].cpu_seconds, 5.7, 1e-9);
    // The tick charged the running stretch; the new pending part is read 2 ms short.
    r.sq_runtime_ns = 6 * kSec;
    r.sq_running_ns = 698'000'000;
    s = a.update(sample(2 * kSec, {r}));
    EXPECT_NEAR(s.threads[0].cpu_seconds, 6.698, 1e-9);
    EXPECT_NEAR(s.threads[0].cpu_util, 0.998, 1e-9);
    // A reading under the last total (the clock behind by more than the time run) holds.
    r.sq_running_ns = 697'000'000;
    s = a.update(sample(2 * kSec + 1'000'000, {r}));
    EXPECT_NEAR(s.threads[0].cpu_seconds, 6.698, 1e-9);
    ASSERT_EQ(s.threads_replaced, 0u);
    // Without IOU_CAP_RUNNING the field is not read.
    r.caps &= ~IOU_CAP_RUNNING;
    r.sq_runtime_ns = 8 * kSec;
    r.sq_running_ns = 123;
    s = a.update(sample(3 * kSec, {r}));
    EXPECT_NEAR(s.threads[0].cpu_seconds, 8.0, 1e-9);
}

// A walk that the kernel splits over several read()s can read a ring long after the sample's
// instant (measured: 0.5 s in a TCG guest whose one free CPU the daemon shares). A thread on its
// CPU is given the CPU time it had at the instant, so per-interval CPU never exceeds the interval.
TEST(AggregatorCpu, RunningThreadIsGivenItsTimeAtTheSampleInstantNotAtItsRead) {
    Aggregator a;
    a.set_hz(250);
    auto r = ring(1, 10, 3, kSqpoll, 0, 50);
    r.caps |= IOU_CAP_RUNNING;
    r.sq_oncpu_ns = kSec / 2;    // on its CPU since 0.5 s, with 5 s charged then
    r.sq_runtime_ns = 5 * kSec;  // nothing charged since (the remote tick has not run)
    r.read_ns = kSec;            // read at the instant
    r.sq_running_ns = kSec / 2;
    auto s = a.update(sample(kSec, {r}));
    EXPECT_NEAR(s.threads[0].cpu_seconds, 5.5, 1e-9);
    // Next sample at 2 s, but this ring is read at 2.5 s: 1 s of CPU in the 1 s interval, not 1.5.
    r.read_ns = 2 * kSec + kSec / 2;
    r.sq_running_ns = 2 * kSec;
    s = a.update(sample(2 * kSec, {r}));
    EXPECT_NEAR(s.threads[0].cpu_seconds, 6.5, 1e-9);
    EXPECT_NEAR(s.threads[0].cpu_util, 1.0, 1e-9);
    // Preempted (no voluntary switch), switched back in at 3.2 s with 7.7 s charged, read at
    // 3.4 s: it ran until just before the switch-in, so at 3 s it had 7.5 s.
    r.sq_oncpu_ns = 3 * kSec + 200'000'000;
    r.sq_runtime_ns = 7'700'000'000;
    r.read_ns = 3 * kSec + 400'000'000;
    r.sq_running_ns = 200'000'000;
    s = a.update(sample(3 * kSec, {r}));
    EXPECT_NEAR(s.threads[0].cpu_seconds, 7.5, 1e-9);
    // Slept since (one voluntary switch), switched in at 4.2 s with 7.8 s charged, read at 4.4 s:
    // it had at most what it had at the switch-in.
    r.sq_nvcsw += 1;
    r.sq_oncpu_ns = 4 * kSec + 200'000'000;
    r.sq_runtime_ns = 7'800'000'000;
    r.read_ns = 4 * kSec + 400'000'000;
    s = a.update(sample(4 * kSec, {r}));
    EXPECT_NEAR(s.threads[0].cpu_seconds, 7.8, 1e-9);
}

// What the scheduler gate is told of each thread (model/sched_gate.hpp): switched when new,
// when back after a walk that missed it, or after a voluntary switch; quiet otherwise.
TEST(AggregatorGate, AThreadIsSwitchedWhenNewBackOrAfterAVoluntarySwitch) {
    Aggregator a;
    auto r = ring(1, 10, 3, kSqpoll, 0, 50);
    r.sq_start_ns = 7;
    r.sq_nvcsw = 5;
    const auto at = [&](std::uint64_t s, std::vector<iou_ring_record> rings) {
        a.update(sample(s * kSec, std::move(rings)));
        return a.gate_threads();
    };
    auto g = at(1, {r});
    ASSERT_EQ(g.size(), 1u);
    EXPECT_TRUE(g[0].switched) << "first seen";
    EXPECT_TRUE(g[0].fresh) << "first seen";
    g = at(2, {r});
    ASSERT_EQ(g.size(), 1u);
    EXPECT_FALSE(g[0].switched);
    EXPECT_FALSE(g[0].fresh);
    EXPECT_TRUE(g[0].running);
    r.sq_nvcsw = 6;
    EXPECT_TRUE(at(3, {r}).at(0).switched) << "a voluntary switch";
    EXPECT_FALSE(at(4, {r}).at(0).switched);
    EXPECT_TRUE(at(5, {}).empty()) << "a walk that missed it";
    g = at(6, {r});
    EXPECT_TRUE(g.at(0).switched) << "back after the miss";
    EXPECT_FALSE(g.at(0).fresh) << "back after the miss: not new";
    r.sq_state = 1;
    g = at(7, {r});
    EXPECT_FALSE(g.at(0).switched);
    EXPECT_FALSE(g.at(0).running);
    // Another thread under the same tid: new again.
    r.sq_state = 0;
    r.sq_start_ns = 9;
    g = at(8, {r});
    EXPECT_TRUE(g.at(0).switched) << "a reused tid";
    EXPECT_TRUE(g.at(0).fresh) << "a reused tid";
}
