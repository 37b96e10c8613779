// make_advice and the daemon's AdviceWindow (model/advisor.cpp): the window's length and clock,
// the snapshot each window is judged against, and what every finding is labelled with. Each
// family of findings, the idle model and the prices have an advisor_*_test.cpp of their own.
#include <gtest/gtest.h>

#include "tests/unit/model/advisor_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

TEST(Advise, ShortWindowGivesNoAdvice) {
    Snapshot a = snap(0), b = snap(2);
    a.threads = {thread(5, 9, 0, 0)};
    b.threads = {thread(5, 9, 2, 0)};
    const auto adv = make_advice(a, b);
    EXPECT_EQ(adv.window_seconds, 0);
    EXPECT_TRUE(adv.findings.empty());
    ASSERT_FALSE(adv.notes.empty());
    EXPECT_NE(adv.notes.front().find("not enough data"), std::string::npos);
}

// An NTP step between two samples moves the wall clock, not the monotonic one: the window is
// what really passed.
TEST(Advise, WindowsAreMeasuredOnTheMonotonicClock) {
    Snapshot a = snap(0), b = snap(100);  // the wall clock stepped 98 s forward meanwhile
    a.monotonic_seconds = 5000;
    b.monotonic_seconds = 5002;
    EXPECT_DOUBLE_EQ(seconds_between(a, b), 2);
    a.threads = {thread(5, 9, 0, 0)};
    b.threads = {thread(5, 9, 2, 0)};
    const auto adv = make_advice(a, b);
    ASSERT_FALSE(adv.notes.empty());
    EXPECT_NE(adv.notes.front().find("not enough data yet: 2.0 s observed"), std::string::npos)
        << adv.notes.front();
    // A snapshot from a daemon that did not send the monotonic time: the wall clock it is.
    a.monotonic_seconds = 0;
    EXPECT_DOUBLE_EQ(seconds_between(a, b), 100);
}

TEST(AdviceWindow, JudgesAgainstASnapshotAWindowOld) {
    AdviceWindow w(10);
    Advice last;
    for (int t = 0; t <= 40; ++t) {
        auto s = std::make_shared<Snapshot>(snap(t));
        s->threads = {thread(5, 9, t * 0.99, 0)};
        s->rings = {ring("9:4", 2, 5, 0)};
        last = w.update(s);
        if (t < 5) {
            EXPECT_TRUE(last.findings.empty()) << t;
        }
    }
    EXPECT_GE(last.window_seconds, 10);
    EXPECT_LE(last.window_seconds, 10 + 10.0 / 8 + 1);
    ASSERT_FALSE(last.findings.empty());
    EXPECT_EQ(last.findings.front().id, "sq_spinning_without_work");
}

// At a minute's window it judges every 5 s, and the samples between carry the last verdict:
// its window moves only when it judges.
TEST(AdviceWindow, JudgesAfreshEveryTwelfthOfTheWindow) {
    AdviceWindow w(60);
    std::vector<double> judged;
    for (int t = 0; t <= 80; ++t) {
        auto s = std::make_shared<Snapshot>(snap(t));
        s->threads = {thread(5, 9, t * 0.99, 0)};
        s->rings = {ring("9:4", 2, 5, 0)};
        judged.push_back(w.update(s).window_seconds);
    }
    for (int t = 61; t <= 80; ++t) EXPECT_EQ(judged[t] != judged[t - 1], t % 5 == 0) << t;
}

TEST(Advise, AFindingNamesTheThreadsContainerAndPod) {
    Snapshot a = snap(0), b = snap(10);
    auto t0 = thread(42, 7, 0, 0, 5.0), t1 = thread(42, 7, 9.9, 0, 5.0);
    t1.cgroup = {"/kubepods/besteffort/pod1/x", "containerd://abc", "0a1b"};
    a.threads = {t0};
    b.threads = {t1};
    a.rings = {ring("7:5", 3, 42, 0)};
    b.rings = {ring("7:5", 3, 42, 0)};
    const auto adv = make_advice(a, b);
    ASSERT_FALSE(adv.findings.empty());
    EXPECT_EQ(adv.findings.front().container_id, "containerd://abc");
    EXPECT_EQ(adv.findings.front().pod_uid, "0a1b");
}
