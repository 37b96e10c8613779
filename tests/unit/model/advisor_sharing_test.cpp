// sq_threads_should_share and shared_thread_backlog (model/advisor_sharing.cpp).
#include <gtest/gtest.h>

#include "tests/unit/model/advisor_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

TEST(Advise, IdleThreadsOfOneProcessShouldShare) {
    Snapshot a = snap(0), b = snap(10);
    a.threads = {thread(5, 9, 0, 0), thread(6, 9, 0, 0), thread(7, 8, 0, 0)};
    b.threads = {thread(5, 9, 9.5, 0.1), thread(6, 9, 9.5, 0.1), thread(7, 8, 9.5, 0.1)};
    a.rings = {ring("9:4", 2, 5, 0), ring("9:5", 3, 6, 0), ring("8:4", 4, 7, 0)};
    b.rings = {ring("9:4", 2, 5, 10000), ring("9:5", 3, 6, 10000), ring("8:4", 4, 7, 10000)};
    const auto adv = make_advice(a, b);
    const Finding* f = find(adv, "sq_threads_should_share");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->subject, "sq_threads 5,6");  // pid 8's thread has nobody to share with
    EXPECT_NEAR(figure(f->predicted, "cpu_cores"), 1.0, 1e-9);  // neither ever sleeps
    EXPECT_NEAR(figure(f->predicted, "cpu_cores_saved"), 0.9, 1e-9);
    EXPECT_NE(f->change.find("IORING_SETUP_ATTACH_WQ"), std::string::npos);

    // Sharing is priced for the group beside what it costs now and without SQPOLL at all:
    // the two threads' work plus 2,000 io_uring_enter/s at 1 us.
    ASSERT_EQ(f->alternatives.size(), 3u);
    EXPECT_EQ(f->alternatives[0].name, "now");
    EXPECT_NEAR(f->alternatives[0].cpu_cores, 1.9, 1e-9);
    EXPECT_EQ(f->alternatives[1].name, "share_sq_thread");
    EXPECT_TRUE(f->alternatives[1].recommended);
    EXPECT_NEAR(f->alternatives[1].cpu_cores, 1.0, 1e-9);
    EXPECT_EQ(f->alternatives[2].name, "no_sqpoll");
    EXPECT_FALSE(f->alternatives[2].recommended);
    EXPECT_NEAR(f->alternatives[2].cpu_cores, 0.02 + 2000 * 1e-6, 1e-9);
}

TEST(Advise, SleepingThreadsMergeByIndependentBusyPeriods) {
    Snapshot a = snap(0), b = snap(10);
    a.threads = {thread(5, 9, 0, 0), thread(6, 9, 0, 0)};
    auto t5 = thread(5, 9, 4.0, 0.1), t6 = thread(6, 9, 4.0, 0.1);
    t5.sleeps = t6.sleeps = t5.wakeups = t6.wakeups = 100;  // 10 per second each
    b.threads = {t5, t6};
    a.rings = {ring("9:4", 2, 5, 0), ring("9:5", 3, 6, 0)};
    b.rings = {ring("9:4", 2, 5, 10000), ring("9:5", 3, 6, 10000)};
    const Finding* f = nullptr;
    const auto adv = make_advice(a, b);
    f = find(adv, "sq_threads_should_share");
    ASSERT_NE(f, nullptr);
    EXPECT_NEAR(figure(f->predicted, "cpu_cores"), 1 - 0.6 * 0.6, 1e-9);
    EXPECT_NEAR(figure(f->predicted, "cpu_cores_saved"), 0.8 - 0.64, 1e-9);
    // Each thread's wakes survive only when the other is idle too.
    EXPECT_NEAR(figure(f->predicted, "wakeups_per_second"), 2 * 10 * 0.6, 1e-9);
    ASSERT_EQ(f->alternatives.size(), 3u);
    EXPECT_NEAR(f->alternatives[0].wakeups_per_second, 20, 1e-9);
    EXPECT_NEAR(f->alternatives[1].wakeups_per_second, 12, 1e-9);
    // Fewer wakes, fewer submissions that wait for one: 12 of 2,000 SQEs/s, at the assumed
    // wake latency.
    EXPECT_NEAR(f->alternatives[1].added_latency_seconds,
                12.0 / 2000 * AdviseOptions{}.assumed_wake_latency_seconds, 1e-15);
}

TEST(Advise, ThreadsPinnedToDifferentCpusAreLeftAlone) {
    Snapshot a = snap(0), b = snap(10);
    auto p0 = thread(5, 9, 0, 0), p1 = thread(6, 9, 0, 0);
    p0.pinned = p1.pinned = true;
    p0.sq_cpu = 0;
    p1.sq_cpu = 1;
    a.threads = {p0, p1};
    p0.cpu_seconds = p1.cpu_seconds = 9.5;
    p0.work_seconds = p1.work_seconds = 0.1;
    b.threads = {p0, p1};
    a.rings = {ring("9:4", 2, 5, 0), ring("9:5", 3, 6, 0)};
    b.rings = {ring("9:4", 2, 5, 10000), ring("9:5", 3, 6, 10000)};
    EXPECT_EQ(find(make_advice(a, b), "sq_threads_should_share"), nullptr);
}

TEST(Advise, BacklogOnASaturatedSharedThread) {
    Snapshot a = snap(0), b = snap(10);
    a.threads = {thread(5, 9, 0, 0)};
    b.threads = {thread(5, 9, 10, 9.8)};
    auto r0 = ring("9:4", 2, 5, 0), r1 = ring("9:5", 3, 5, 0);
    a.rings = {r0, r1};
    r0.sqes_total = 5'000'000;
    r1.sqes_total = 1'000'000;
    r0.samples = r1.samples = 10;
    r1.samples_with_backlog = 9;
    r1.backlog_sum = 400;
    b.rings = {r0, r1};
    const auto adv = make_advice(a, b);
    const Finding* f = find(adv, "shared_thread_backlog");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->ring, "9:5");
    EXPECT_NEAR(figure(f->evidence, "backlog_sample_fraction"), 0.9, 1e-9);
    EXPECT_NEAR(figure(f->evidence, "ring_share_of_thread"), 1.0 / 6, 1e-9);
    EXPECT_NE(f->change.find("8 SQEs"), std::string::npos);  // mean backlog 40 > the pass cap
    // The same backlog on a thread that still idles is not the thread's fault.
    b.threads = {thread(5, 9, 10, 2)};
    EXPECT_EQ(find(make_advice(a, b), "shared_thread_backlog"), nullptr);
}
