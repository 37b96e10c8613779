// The thread stage (model/aggregator_threads.cpp): shares and fairness, identity under tid reuse,
// the thread's own process, wakers, per-CPU shared threads.
#include <gtest/gtest.h>

#include "tests/unit/model/aggregator_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

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
