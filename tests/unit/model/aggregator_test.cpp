#include "model/aggregator.hpp"

#include <gtest/gtest.h>

#include <cstring>

using namespace iouscope;

namespace {

constexpr std::uint32_t kSqpoll = 2;

iou_ring_record ring(std::uint64_t ctx, std::uint32_t pid, std::uint32_t fd, std::uint32_t flags,
                     std::uint32_t head, std::int32_t tid = -1) {
    iou_ring_record r{};
    r.ctx = ctx;
    r.pid = pid;
    r.fd = fd;
    r.setup_flags = flags;
    r.sq_head = head;
    r.sq_tail = head;
    r.cq_tail = head;
    r.sq_entries = 64;
    r.caps = IOU_CAP_SQ_TAIL;
    r.sq_tid = tid;
    r.sq_cpu = -1;
    r.jiffies = 0;
    r.sq_thread_idle = 250;  // 1 s in jiffies at HZ=250
    std::strcpy(r.comm, "app");
    if (tid > 0) {
        r.caps |= IOU_CAP_SQ_THREAD;
        r.sqd = 0x5000;
    }
    return r;
}

RawSample sample(std::uint64_t t_ns, std::vector<iou_ring_record> rings) {
    RawSample s;
    s.mono_ns = t_ns;
    s.rings = std::move(rings);
    return s;
}

const RingSnapshot& find_ring(const Snapshot& s, const std::string& id) {
    for (const auto& r : s.rings)
        if (r.id == id) return r;
    throw std::runtime_error("no ring " + id);
}

constexpr std::uint64_t kSec = 1'000'000'000;

}  // namespace

TEST(Aggregator, MeasuresHzFromJiffiesWhenTheConfigIsUnknown) {
    Aggregator a;
    auto r = ring(1, 10, 3, kSqpoll, 0, 50);
    r.jiffies = 1000;
    auto s = a.update(sample(kSec, {r}));
    EXPECT_EQ(a.hz(), 0u);
    EXPECT_DOUBLE_EQ(s.threads[0].idle_setting_seconds, 0);  // unknown yet
    r.jiffies = 1000 + 249;  // one second later, one jiffy of rounding short
    s = a.update(sample(2 * kSec, {r}));
    EXPECT_EQ(a.hz(), 250u);
    EXPECT_DOUBLE_EQ(s.threads[0].idle_setting_seconds, 1.0);
}

TEST(Aggregator, ModesFromSetupFlags) {
    EXPECT_EQ(ring_mode(0), "plain");
    EXPECT_EQ(ring_mode(1), "iopoll");
    EXPECT_EQ(ring_mode(2), "sqpoll");
    EXPECT_EQ(ring_mode(3), "both");
    EXPECT_EQ(ring_mode(2 | 4 | 8), "sqpoll");
}

TEST(Aggregator, RingCountersAreExactAcrossTheWrap) {
    Aggregator a;
    a.update(sample(kSec, {ring(1, 10, 3, 0, 0xFFFFFF00u)}));
    auto s = a.update(sample(2 * kSec, {ring(1, 10, 3, 0, 0x100u)}));
    ASSERT_EQ(s.rings.size(), 1u);
    EXPECT_EQ(s.rings[0].sqes_total, 0x100000100ull);
    EXPECT_EQ(s.rings[0].id, "10:3");
    EXPECT_EQ(s.rings[0].mode, "plain");
    EXPECT_DOUBLE_EQ(s.rings[0].sqe_rate, 512.0);
}

TEST(Aggregator, RingIdIsStableAndFirstHolderWins) {
    Aggregator a;
    auto s = a.update(sample(kSec, {ring(7, 10, 3, 0, 5), ring(7, 11, 9, 0, 5)}));
    ASSERT_EQ(s.rings.size(), 1u);
    EXPECT_EQ(s.rings[0].id, "10:3");
    // The first holder exits; the ring keeps its name.
    s = a.update(sample(2 * kSec, {ring(7, 11, 9, 0, 6)}));
    ASSERT_EQ(s.rings.size(), 1u);
    EXPECT_EQ(s.rings[0].id, "10:3");
    EXPECT_EQ(s.rings[0].sqes_total, 6u);
}

TEST(Aggregator, BacklogIsTailMinusHeadModulo32) {
    Aggregator a;
    auto r = ring(1, 10, 3, kSqpoll, 0xFFFFFFFEu, 50);
    r.sq_tail = 3;  // the application's tail has wrapped, the kernel's head not yet
    auto s = a.update(sample(kSec, {r}));
    EXPECT_EQ(s.rings[0].sq_backlog, 5u);
}

TEST(Aggregator, SharesAndFairnessOfEqualRings) {
    Aggregator a;
    a.update(sample(kSec, {ring(1, 10, 3, kSqpoll, 0, 50), ring(2, 10, 4, kSqpoll, 0, 50)}));
    auto s = a.update(
        sample(2 * kSec, {ring(1, 10, 3, kSqpoll, 1000, 50), ring(2, 10, 4, kSqpoll, 1000, 50)}));
    ASSERT_EQ(s.threads.size(), 1u);
    EXPECT_EQ(s.threads[0].rings, 2u);
    EXPECT_DOUBLE_EQ(s.threads[0].fairness, 1.0);
    EXPECT_DOUBLE_EQ(find_ring(s, "10:3").sqthread_share, 0.5);
    EXPECT_DOUBLE_EQ(s.threads[0].sqe_rate, 2000.0);
}

TEST(Aggregator, StarvedRingWithBacklogLowersFairness) {
    Aggregator a;
    a.update(sample(kSec, {ring(1, 10, 3, kSqpoll, 0, 50), ring(2, 10, 4, kSqpoll, 0, 50)}));
    auto starved = ring(2, 10, 4, kSqpoll, 0, 50);
    starved.sq_tail = 32;  // wants service, got none
    auto s = a.update(sample(2 * kSec, {ring(1, 10, 3, kSqpoll, 900, 50), starved}));
    EXPECT_DOUBLE_EQ(s.threads[0].fairness, 0.5);
    EXPECT_DOUBLE_EQ(find_ring(s, "10:3").sqthread_share, 1.0);
    EXPECT_DOUBLE_EQ(find_ring(s, "10:4").sqthread_share, 0.0);
}

TEST(Aggregator, IdleRingsWithoutDemandDoNotCountAgainstFairness) {
    Aggregator a;
    a.update(sample(kSec, {ring(1, 10, 3, kSqpoll, 0, 50), ring(2, 10, 4, kSqpoll, 0, 50)}));
    auto s = a.update(
        sample(2 * kSec, {ring(1, 10, 3, kSqpoll, 900, 50), ring(2, 10, 4, kSqpoll, 0, 50)}));
    EXPECT_DOUBLE_EQ(s.threads[0].fairness, 1.0);
}

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

TEST(Aggregator, ShortLivedRingsAreCountedOnce) {
    Aggregator a;
    iou_created_ring gone{};
    gone.ctx = 99;
    gone.setup_flags = kSqpoll;
    iou_created_ring stays{};
    stays.ctx = 1;
    RawSample raw = sample(kSec, {ring(1, 10, 3, 0, 0)});
    raw.created = {gone, stays};
    auto s = a.update(raw);
    ASSERT_EQ(s.rings_short_lived_by_mode.size(), 1u);
    EXPECT_EQ(s.rings_short_lived_by_mode[0], (std::pair<std::string, std::uint64_t>{"sqpoll", 1}));
    EXPECT_EQ(s.rings_created_by_mode.size(), 2u);
    // The walked ring's record drained one sample late is not short-lived.
    RawSample raw2 = sample(2 * kSec, {ring(1, 10, 3, 0, 0), ring(2, 10, 4, 0, 0)});
    iou_created_ring late{};
    late.ctx = 2;
    raw2.created = {late};
    s = a.update(raw2);
    EXPECT_EQ(s.rings_short_lived_by_mode[0].second, 1u);
}

TEST(Aggregator, VanishedThreadsExpireAfterAFewSamples) {
    Aggregator a;
    RawSample raw = sample(kSec, {ring(1, 10, 3, kSqpoll, 0, 50)});
    raw.sched.emplace_back(50, iou_sched_state{});
    a.update(raw);
    EXPECT_TRUE(a.cleanup().threads.empty());
    std::vector<std::uint32_t> expired;
    for (int i = 0; i < Aggregator::kExpireAfter; ++i) {
        RawSample r = sample((2 + i) * kSec, {});
        r.sched.emplace_back(50, iou_sched_state{});
        auto s = a.update(r);
        EXPECT_TRUE(s.threads.empty());
        EXPECT_TRUE(s.rings.empty());
        expired.insert(expired.end(), a.cleanup().threads.begin(), a.cleanup().threads.end());
    }
    EXPECT_EQ(expired, std::vector<std::uint32_t>{50});
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

TEST(Aggregator, DeepTierRingWorkAndIopoll) {
    Aggregator a;
    auto r1 = ring(1, 10, 3, kSqpoll | 1, 0, 50);
    auto r2 = ring(2, 10, 4, kSqpoll | 1, 0, 50);
    RawSample raw = sample(kSec, {r1, r2});
    raw.ring_work = {{1, {300'000'000, 10, 320, 450'000'000}}, {2, {100'000'000, 5, 160, 0}}};
    raw.iopoll = {{{1, IOU_CALLER_SQ_THREAD, 0}, {100, 40, 300, 50'000'000}}};
    a.update(raw);
    raw.mono_ns = 2 * kSec;
    raw.iopoll = {{{1, IOU_CALLER_SQ_THREAD, 0}, {300, 140, 700, 90'000'000}}};
    auto s = a.update(raw);
    const auto& ring1 = find_ring(s, "10:3");
    EXPECT_TRUE(ring1.has_sqthread_work);
    EXPECT_NEAR(ring1.sqthread_work_seconds, 0.39, 1e-12);  // submit 0.3 + polling 0.09
    ASSERT_EQ(ring1.iopoll.size(), 1u);
    EXPECT_EQ(ring1.iopoll[0].caller, "sq_thread");
    EXPECT_DOUBLE_EQ(ring1.iopoll[0].calls_rate, 200);
    EXPECT_DOUBLE_EQ(ring1.iopoll[0].empty_ratio, 0.5);
    EXPECT_DOUBLE_EQ(ring1.iopoll[0].completions_per_call, 2);
    EXPECT_NEAR(s.threads[0].rings_work_seconds, 0.49, 1e-12);
    EXPECT_NEAR(ring1.sqthread_submit_seconds, 0.3, 1e-12);
    // With the loop-pass probe a ring's work is its turn time instead.
    raw.ring_turns = true;
    s = a.update(raw);
    EXPECT_NEAR(find_ring(s, "10:3").sqthread_work_seconds, 0.45, 1e-12);
    EXPECT_NEAR(find_ring(s, "10:3").sqthread_submit_seconds, 0.3, 1e-12);
    raw.ring_turns = false;
    // A ring that goes away is reported so its BPF state can be dropped.
    raw.mono_ns = 3 * kSec + 1;
    raw.rings = {r1};
    raw.iopoll.push_back({{2, IOU_CALLER_APP, 0}, {10, 1, 40, 0}});
    s = a.update(raw);
    EXPECT_EQ(a.cleanup().rings, std::vector<std::uint64_t>{2});
    // Ring 2's final counts stay in the host totals after the sampler drops them.
    raw.mono_ns = 4 * kSec;
    raw.iopoll.pop_back();
    s = a.update(raw);
    std::uint64_t app = 0, sq = 0;
    for (const auto& io : s.iopoll_host) (io.caller == "app" ? app : sq) = io.completions;
    EXPECT_EQ(app, 40u);
    EXPECT_EQ(sq, 700u);
}

TEST(Aggregator, DeviceWithoutPollQueuesIsFlaggedWhileItHappens) {
    Aggregator a;
    auto dev = [](const char* name, std::uint64_t polled, std::uint64_t irq, std::uint64_t intent) {
        iou_dev_key k{};
        std::strncpy(k.disk, name, sizeof k.disk - 1);
        iou_nvme_stats v{};
        v.polled = polled;
        v.irq = irq;
        v.polled_intent_irq = intent;
        v.polls = polled * 3;
        return std::make_pair(k, v);
    };
    RawSample raw = sample(kSec, {});
    raw.nvme = {dev("nvme0n1", 100, 0, 0), dev("nvme1n1", 0, 100, 100)};
    auto s = a.update(raw);
    ASSERT_EQ(s.devices.size(), 2u);
    EXPECT_FALSE(s.devices[0].iopoll_without_poll_queues);
    EXPECT_TRUE(s.devices[1].iopoll_without_poll_queues);
    raw.mono_ns = 2 * kSec;
    raw.nvme = {dev("nvme0n1", 300, 0, 0), dev("nvme1n1", 0, 100, 100)};
    s = a.update(raw);
    EXPECT_DOUBLE_EQ(s.devices[0].polled_ratio, 1.0);
    EXPECT_DOUBLE_EQ(s.devices[0].polls_per_completion, 3.0);
    EXPECT_DOUBLE_EQ(s.devices[0].completions_rate, 200.0);
    EXPECT_TRUE(s.devices[1].iopoll_without_poll_queues);  // within the hold time
    raw.mono_ns = 2 * kSec + Aggregator::kPollQueueFlagHoldNs;
    s = a.update(raw);
    EXPECT_FALSE(s.devices[1].iopoll_without_poll_queues);  // nothing new for a minute
}

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

TEST(Aggregator, CompletionsHandedToIoUringOnlyWhereTheProbeIsAttached) {
    Aggregator a;
    iou_dev_key k{};
    std::strncpy(k.disk, "nvme0n1", sizeof k.disk - 1);
    iou_nvme_stats v{};
    v.polled = 10;
    v.cqes = 10;
    v.cqe_delay_hist[10] = 4;  // [1024, 2048) ns
    v.cqe_delay_hist[12] = 6;  // [4096, 8192) ns
    v.cqe_delay_sum_ns = 4 * 1500 + 6 * 5000;
    RawSample raw = sample(kSec, {});
    raw.nvme = {{k, v}};
    auto s = a.update(raw);
    ASSERT_EQ(s.devices.size(), 1u);
    EXPECT_FALSE(s.devices[0].has_cqes) << "no probe: no count, rather than a count of 0";
    raw.cmd_done = true;
    raw.mono_ns = 2 * kSec;
    s = a.update(raw);
    const auto& d = s.devices[0];
    EXPECT_TRUE(d.has_cqes);
    EXPECT_EQ(d.cqes, 10u);
    EXPECT_EQ(d.cqe_delay.count, 10u);
    EXPECT_NEAR(d.cqe_delay.sum_s, 36e-6, 1e-12);
    // Cumulative buckets: 4 at or below 2048 ns, all 10 at or below 8192 ns.
    ASSERT_EQ(d.cqe_delay.upper_bounds_s.size(), d.cqe_delay.cumulative.size());
    for (std::size_t i = 0; i < d.cqe_delay.upper_bounds_s.size(); ++i) {
        const double ub = d.cqe_delay.upper_bounds_s[i];
        std::uint64_t want = ub < 2048e-9 ? 0 : ub < 8192e-9 ? 4 : 10;
        EXPECT_EQ(d.cqe_delay.cumulative[i], want) << ub;
    }
}

// --- Identity and lifecycle (docs/ARCHITECTURE.md, "Identity and lifecycle") ------------------

TEST(AggregatorIdentity, ARingAtAReusedAddressStartsFromItsOwnCounts) {
    // The reproduction: 5,000 SQEs, the ring closes, the next one gets the same ctx and fd and
    // submits 100. A wrap would have read 2^32 + 100.
    Aggregator a;
    auto old_ring = ring(0x1000, 10, 3, 0, 5000);
    old_ring.born_ns = 1;
    a.update(sample(kSec, {old_ring}));
    auto new_ring = ring(0x1000, 10, 3, 0, 100);
    new_ring.born_ns = kSec + 5;
    RawSample first = sample(2 * kSec, {new_ring});
    first.unix_time = 1000;
    auto s = a.update(first);
    ASSERT_EQ(s.rings.size(), 1u);
    EXPECT_EQ(s.rings[0].sqes_total, 100u);
    EXPECT_EQ(s.rings[0].cqes_total, 100u);
    EXPECT_EQ(s.rings_replaced, 1u);
    // No rate from the old ring's counts either.
    EXPECT_DOUBLE_EQ(s.rings[0].sqe_rate, 0);
    // Its start time is its birth, told in Unix time, and stays put.
    EXPECT_DOUBLE_EQ(s.rings[0].start_time_seconds, 1000 - (kSec - 5) / 1e9);
    RawSample later = sample(3 * kSec, {new_ring});
    later.unix_time = 1001.5;
    s = a.update(later);
    EXPECT_DOUBLE_EQ(s.rings[0].start_time_seconds, 1000 - (kSec - 5) / 1e9);
}

TEST(AggregatorIdentity, ACounterThatGoesBackIsANewRingUnlessTheWrapIsProven) {
    // Rings created before iouscope attached have no birth time: the counters tell.
    Aggregator a;
    a.update(sample(kSec, {ring(0x1000, 10, 3, 0, 5000)}));
    auto s = a.update(sample(2 * kSec, {ring(0x1000, 10, 3, 0, 100)}));
    EXPECT_EQ(s.rings[0].sqes_total, 100u);
    EXPECT_EQ(s.rings_replaced, 1u);
    // From the top quarter of the range to the bottom quarter is a wrap, not a new ring.
    Aggregator b;
    b.update(sample(kSec, {ring(0x1000, 10, 3, 0, 0xF000'0000u)}));
    s = b.update(sample(2 * kSec, {ring(0x1000, 10, 3, 0, 0x10u)}));
    EXPECT_EQ(s.rings[0].sqes_total, 0x1'0000'0010ull);
    EXPECT_EQ(s.rings_replaced, 0u);
    WrappingCounter32 c;
    EXPECT_TRUE(c.continues(7));
    c.observe(0x8000'0000u);
    EXPECT_FALSE(c.continues(0x10u));  // a step of 2^31: no ring does that between samples
    EXPECT_TRUE(c.continues(0x8000'0001u));
}

TEST(AggregatorIdentity, AThreadUnderAReusedTidStartsAfresh) {
    Aggregator a;
    auto r = ring(1, 10, 3, kSqpoll, 0, 50);
    r.sq_start_ns = 111;
    r.sq_runtime_ns = 5 * kSec;
    r.sq_tgid = 10;
    std::strcpy(r.sq_comm, "owner");
    RawSample raw = sample(kSec, {r});
    iou_sched_state st{};
    st.owner_start_ns = 111;
    st.sleeps = 40;
    raw.sched = {{50, st}};
    auto s = a.update(raw);
    ASSERT_EQ(s.threads.size(), 1u);
    EXPECT_EQ(s.threads[0].sleeps, 40u);
    EXPECT_EQ(s.threads[0].comm, "owner");
    const double first_start = s.threads[0].start_time_seconds;
    // Same tid, another thread: its ring is new too. The sched entry is still the old
    // thread's (the new one has not slept yet): it must not be read as the new thread's.
    auto r2 = ring(2, 11, 3, kSqpoll, 10, 50);
    r2.sq_start_ns = 222;
    r2.sq_runtime_ns = kSec / 10;
    r2.sq_tgid = 11;
    std::strcpy(r2.sq_comm, "next");
    RawSample raw2 = sample(2 * kSec, {r2});
    raw2.sched = {{50, st}};
    raw2.wakers = {{{50, 7, IOU_WAKER_TASK, 0}, {111, 9, "old"}},
                   {{50, 8, IOU_WAKER_TASK, 0}, {222, 2, "new"}}};
    s = a.update(raw2);
    ASSERT_EQ(s.threads.size(), 1u);
    EXPECT_EQ(s.threads[0].sleeps, 0u);  // none of the old thread's 40
    EXPECT_EQ(s.threads[0].pid, 11u);
    EXPECT_EQ(s.threads[0].comm, "next");
    EXPECT_DOUBLE_EQ(s.threads[0].cpu_seconds, 0.1);
    EXPECT_EQ(s.threads_replaced, 1u);
    // The new thread's start time tells Prometheus users the counters restarted.
    EXPECT_NE(s.threads[0].start_time_seconds, first_start);
    ASSERT_EQ(s.threads[0].wakers.size(), 1u);
    EXPECT_EQ(s.threads[0].wakers[0].wakeups, 2u);
    // The old thread's waker pair is deleted at once.
    ASSERT_EQ(a.cleanup().wakers.size(), 1u);
    EXPECT_EQ(a.cleanup().wakers[0].waker_pid, 7u);
}

TEST(AggregatorIdentity, AThreadIsLabelledWithItsOwnProcess) {
    // A ring held by another process (fork, pidfd_getfd) is walked first: the thread still
    // carries the pid and comm of the process it belongs to.
    Aggregator a;
    auto borrowed = ring(1, 20, 3, kSqpoll, 0, 50);
    std::strcpy(borrowed.comm, "borrower");
    borrowed.sq_tgid = 10;
    std::strcpy(borrowed.sq_comm, "creator");
    auto s = a.update(sample(kSec, {borrowed}));
    ASSERT_EQ(s.threads.size(), 1u);
    EXPECT_EQ(s.threads[0].pid, 10u);
    EXPECT_EQ(s.threads[0].comm, "creator");
}

TEST(AggregatorIdentity, EntriesOfRingsNoWalkSawGoAfterTwoMisses) {
    Aggregator a;
    RawSample raw = sample(kSec, {ring(1, 10, 3, 0, 0)});
    raw.ring_work = {{7, iou_ring_work{}}};
    raw.births = {{7, 123}, {1, 5}};
    raw.iopoll = {{{7, IOU_CALLER_APP, 0}, {4, 1, 3, 10}}};
    a.update(raw);
    // Ring 7 may have been created after the walk: it gets a second chance.
    EXPECT_TRUE(a.cleanup().rings.empty());
    raw.mono_ns = 2 * kSec;
    auto s = a.update(raw);
    EXPECT_EQ(a.cleanup().rings, std::vector<std::uint64_t>{7});
    // Its io_do_iopoll counts stay in the host totals once the entry is deleted.
    raw.mono_ns = 3 * kSec;
    raw.ring_work.clear();
    raw.iopoll.clear();
    raw.births = {{1, 5}};
    s = a.update(raw);
    ASSERT_EQ(s.iopoll_host.size(), 1u);
    EXPECT_EQ(s.iopoll_host[0].completions, 3u);
    EXPECT_TRUE(a.cleanup().rings.empty());
}

TEST(AggregatorIdentity, AnIncompleteWalkExpiresNothing) {
    Aggregator a;
    a.update(sample(kSec, {ring(1, 10, 3, 0, 50), ring(2, 10, 4, kSqpoll, 50, 60)}));
    for (int i = 0; i < Aggregator::kExpireAfter + 1; ++i) {
        RawSample partial = sample((2 + i) * kSec, {ring(1, 10, 3, 0, 60)});
        partial.walk_complete = false;
        auto s = a.update(partial);
        EXPECT_TRUE(a.cleanup().empty());
        EXPECT_EQ(s.walks_incomplete, static_cast<std::uint64_t>(i + 1));
    }
    // Ring 2 was not reached, not closed: it carries on from where it was.
    auto s = a.update(sample(9 * kSec, {ring(1, 10, 3, 0, 70), ring(2, 10, 4, kSqpoll, 80, 60)}));
    EXPECT_EQ(find_ring(s, "10:4").sqes_total, 80u);
    EXPECT_EQ(s.rings_replaced, 0u);
}

TEST(AggregatorIdentity, WakersOfExpiredThreadsGoInOnePass) {
    Aggregator a;
    RawSample raw = sample(kSec, {ring(1, 10, 3, kSqpoll, 0, 50), ring(2, 10, 4, kSqpoll, 0, 51)});
    for (std::uint32_t w = 0; w < 100; ++w) {
        raw.wakers.push_back({{50, w, IOU_WAKER_TASK, 0}, {0, 1, "x"}});
        raw.wakers.push_back({{51, w, IOU_WAKER_TASK, 0}, {0, 1, "x"}});
    }
    a.update(raw);
    std::size_t deleted = 0;
    for (int i = 0; i < Aggregator::kExpireAfter; ++i) {
        raw.mono_ns = (2 + i) * kSec;
        raw.rings = {ring(2, 10, 4, kSqpoll, 0, 51)};
        a.update(raw);
        for (const auto& k : a.cleanup().wakers) {
            EXPECT_EQ(k.sq_tid, 50u);
            ++deleted;
        }
    }
    EXPECT_EQ(deleted, 100u);
}

TEST(AggregatorHz, EveryKconfigHzIsRecognisedAndNothingElse) {
    for (unsigned hz :
         {24u, 32u, 48u, 64u, 100u, 128u, 200u, 250u, 256u, 300u, 500u, 1000u, 1024u, 1200u}) {
        EXPECT_EQ(snap_hz(hz), hz);
        EXPECT_EQ(snap_hz(hz * 1.005), hz) << hz;  // a walk a little late
        EXPECT_EQ(snap_hz(hz * 0.995), hz) << hz;
    }
    EXPECT_EQ(snap_hz(253), 0u);  // between 250 and 256: keep measuring
    EXPECT_EQ(snap_hz(700), 0u);
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

TEST(AggregatorWakers, InterruptWakersAreNamedByContext) {
    Aggregator a;
    a.set_hz(250);
    RawSample raw = sample(kSec, {ring(1, 10, 3, kSqpoll, 0, 50)});
    // The same pid 0 twice: the interrupted idle task, and the idle task waking it itself.
    raw.wakers.push_back({{50, 0, IOU_WAKER_IRQ, 0}, {0, 7, "swapper/1"}});
    raw.wakers.push_back({{50, 0, IOU_WAKER_TASK, 0}, {0, 2, "swapper/0"}});
    auto s = a.update(raw);
    ASSERT_EQ(s.threads[0].wakers.size(), 2u);
    EXPECT_EQ(s.threads[0].wakers[0].comm, "irq");
    EXPECT_EQ(s.threads[0].wakers[0].context, "irq");
    EXPECT_EQ(s.threads[0].wakers[0].wakeups, 7u);
    EXPECT_EQ(s.threads[0].wakers[1].context, "task");
    EXPECT_EQ(s.threads[0].wakers[1].comm, "swapper/0");
}

TEST(AggregatorCoverage, ProbeThatMissesCallSitesShowsUnderOne) {
    Aggregator a;
    a.set_hz(250);
    auto sq = ring(1, 10, 3, kSqpoll, 0, 50);
    auto plain = ring(2, 10, 4, 0, 0);  // submitted by the application: not counted
    RawSample raw = sample(kSec, {sq, plain});
    raw.submit_probe = true;
    auto s = a.update(raw);
    ASSERT_EQ(s.coverage.size(), 1u);
    EXPECT_EQ(s.coverage[0].probe, "io_submit_sqes");
    EXPECT_EQ(s.coverage[0].ratio, -1);  // nothing to compare yet

    // 1,000 SQEs passed the SQPOLL ring's head; the probe saw 600 of them (the rest went
    // through an inlined copy). The plain ring's 5,000 are the application's own.
    sq.sq_head = sq.sq_tail = sq.cq_tail = 1000;
    plain.sq_head = plain.sq_tail = plain.cq_tail = 5000;
    sq.probe_sqes = 600;
    raw = sample(2 * kSec, {sq, plain});
    raw.submit_probe = true;
    s = a.update(raw);
    EXPECT_DOUBLE_EQ(s.coverage[0].ratio, 0.6);
    EXPECT_EQ(s.coverage[0].probe_events, 600u);
    EXPECT_EQ(s.coverage[0].iterator_events, 1000u);

    // A probe that sees nothing at all: no map entry, ratio 0, not "no data".
    Aggregator b;
    raw = sample(kSec, {ring(1, 10, 3, kSqpoll, 0, 50)});
    raw.submit_probe = true;
    b.update(raw);
    raw = sample(2 * kSec, {ring(1, 10, 3, kSqpoll, 500, 50)});
    raw.submit_probe = true;
    EXPECT_DOUBLE_EQ(b.update(raw).coverage[0].ratio, 0.0);

    // Below 100 SQEs in the interval the ratio says nothing.
    sq.sq_head = sq.sq_tail = sq.cq_tail = 1050;
    sq.probe_sqes = 650;
    raw = sample(3 * kSec, {sq, plain});
    raw.submit_probe = true;
    s = a.update(raw);
    EXPECT_EQ(s.coverage[0].ratio, -1);
    EXPECT_EQ(s.coverage[0].iterator_events, 1050u);

    // Without the probe there is no coverage to report.
    Aggregator c;
    EXPECT_TRUE(c.update(sample(kSec, {ring(1, 10, 3, kSqpoll, 0, 50)})).coverage.empty());
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

TEST(AggregatorCgroups, RingsThreadsAndProcessesCarryTheirContainer) {
    const std::string id(64, 'e'), uid = "0a1b2c3d-4e5f-6789-abcd-ef0123456789";
    Aggregator a;
    auto app = ring(1, 10, 3, kSqpoll, 0, 50);
    app.cgroup_id = 7;
    app.sq_cgroup_id = 8;  // the SQ thread moved apart from its process
    auto host = ring(2, 11, 4, 0, 0);
    host.cgroup_id = 9;
    auto unresolved = ring(3, 12, 5, 0, 0);
    unresolved.cgroup_id = 99;  // removed between the walk and the lookup
    auto raw = sample(kSec, {app, host, unresolved});
    raw.cgroup_paths = {{7, "/kubepods/besteffort/pod" + uid + "/" + id},
                        {8, "/system.slice/sq.scope"},
                        {9, "/system.slice/app.service"}};
    const auto s = a.update(raw);
    const auto& r = find_ring(s, "10:3");
    EXPECT_EQ(r.cgroup.cgroup, "/kubepods/besteffort/pod" + uid + "/" + id);
    EXPECT_EQ(r.cgroup.container_id, id);
    EXPECT_EQ(r.cgroup.pod_uid, uid);
    ASSERT_EQ(s.threads.size(), 1u);
    EXPECT_EQ(s.threads[0].cgroup.cgroup, "/system.slice/sq.scope");
    EXPECT_EQ(s.threads[0].cgroup.container_id, "");

    // One entry per process, where its rings are held.
    ASSERT_EQ(s.processes.size(), 3u);
    EXPECT_EQ(s.processes[0].pid, 10u);
    EXPECT_EQ(s.processes[0].cgroup.container_id, id);
    EXPECT_EQ(s.processes[1].cgroup.cgroup, "/system.slice/app.service");
    EXPECT_EQ(s.processes[2].cgroup.cgroup, "");
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

// Seeds patch 000: a per-CPU shared SQ thread is marked, not passed off as its creator's.
TEST(Aggregator, PerCpuSharedThreadIsMarkedShared) {
    Aggregator a;
    auto r1 = ring(1, 10, 3, kSqpoll, 0, 50);
    auto r2 = ring(2, 20, 4, kSqpoll, 0, 50);
    r1.caps |= IOU_CAP_SQD_PERCPU;
    r2.caps |= IOU_CAP_SQD_PERCPU;
    auto s = a.update(sample(kSec, {r1, r2}));
    ASSERT_EQ(s.threads.size(), 1u);
    EXPECT_TRUE(s.threads[0].shared_percpu);
    EXPECT_EQ(s.threads[0].rings, 2u);
    auto plain = a.update(sample(2 * kSec, {ring(1, 10, 3, kSqpoll, 0, 50)}));
    EXPECT_FALSE(plain.threads[0].shared_percpu);
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
