#include "model/sched_gate.hpp"

#include <gtest/gtest.h>

namespace iouscope {
namespace {

constexpr std::uint64_t kSec = 1'000'000'000ull;

// A thread running at the walk with no voluntary switch since the one before.
GateThread busy() {
    return {false, true, false, false};
}
// The same, but new at this walk or switched since the last one.
GateThread switched() {
    return {true, true, false, false};
}

// Walks one second apart from t = 1 s over the same threads; returns the walk at which the gate
// closed, 0 if never.
int walks_to_close(SchedGate& g, const std::vector<GateThread>& threads, int walks) {
    for (int i = 1; i <= walks; ++i)
        if (g.observe(threads, true, static_cast<std::uint64_t>(i) * kSec)) return i;
    return 0;
}

TEST(SchedGate, ClosesAfterFiveQuietSecondsAndOpensAtTheFirstVoluntarySwitch) {
    SchedGate g;
    EXPECT_FALSE(g.observe({switched(), switched()}, true, 0));
    // Quiet from the walk at 1 s, closed 5 s after it.
    EXPECT_EQ(walks_to_close(g, {busy(), busy()}, 10), 6);
    EXPECT_TRUE(g.observe({busy(), busy()}, true, 7 * kSec));
    EXPECT_FALSE(g.observe({switched(), busy()}, true, 8 * kSec));
    // Open again, it needs the whole quiet time anew.
    EXPECT_FALSE(g.observe({busy(), busy()}, true, 9 * kSec));
    EXPECT_FALSE(g.observe({busy(), busy()}, true, 13 * kSec));
    EXPECT_TRUE(g.observe({busy(), busy()}, true, 14 * kSec));
}

TEST(SchedGate, AWalkOfFewSamplesDoesNotCloseItAtShortIntervals) {
    SchedGate g;
    // 100 ms walks: the time, not the walk count, rules.
    int closed_at = 0;
    for (int i = 1; i <= 80 && !closed_at; ++i)
        if (g.observe({busy()}, true, static_cast<std::uint64_t>(i) * kSec / 10)) closed_at = i;
    EXPECT_EQ(closed_at, 51);
}

TEST(SchedGate, StaysOpenWithoutThreadsOnIncompleteWalksAndForAnythingNotQuiet) {
    SchedGate none;
    EXPECT_EQ(walks_to_close(none, {}, 20), 0);
    SchedGate partial;
    for (int i = 1; i <= 20; ++i)
        EXPECT_FALSE(partial.observe({busy()}, i % 3 != 0, static_cast<std::uint64_t>(i) * kSec));
    for (int field = 0; field < 4; ++field) {
        SchedGate g;
        GateThread t = busy();
        (field == 0   ? t.switched
         : field == 1 ? t.running
         : field == 2 ? t.sleep_open
                      : t.untraced_open) = field != 1;
        EXPECT_EQ(walks_to_close(g, {t}, 20), 0) << "field " << field;
    }
}

// A thread new at this walk: switched, perhaps only by the kernel's setup of it.
GateThread fresh() {
    GateThread t = switched();
    t.fresh = true;
    return t;
}

TEST(SchedGate, ANewOrSwitchedThreadAmongQuietOnesOpensIt) {
    SchedGate g;
    ASSERT_EQ(walks_to_close(g, {busy()}, 10), 6);
    EXPECT_FALSE(g.observe({busy(), switched()}, true, 7 * kSec));
    SchedGate h;
    ASSERT_EQ(walks_to_close(h, {busy()}, 10), 6);
    EXPECT_FALSE(h.observe({busy(), fresh()}, true, 7 * kSec)) << "not lazy: a new thread opens it";
}

TEST(SchedGateLazy, ClosedWithoutThreadsAndWhileNewThreadsRun) {
    SchedGate g(true);
    EXPECT_TRUE(g.closed()) << "from the start";
    EXPECT_TRUE(g.observe({}, true, 1 * kSec));
    EXPECT_TRUE(g.observe({fresh()}, true, 2 * kSec)) << "a new thread that runs";
    EXPECT_TRUE(g.observe({busy()}, true, 3 * kSec));
    EXPECT_FALSE(g.observe({switched()}, true, 4 * kSec)) << "its count moved: it slept";
    // Open, it closes as the gate that is not lazy does, 5 s after the first quiet walk.
    EXPECT_EQ(walks_to_close(g, {busy()}, 10), 6);
    // A new thread found asleep, or with a sleep open, has slept: it opens the gate.
    GateThread asleep = fresh();
    asleep.running = false;
    EXPECT_FALSE(g.observe({busy(), asleep}, true, 20 * kSec));
    // Back to no thread at all: closed at once, with nothing to wait for.
    EXPECT_TRUE(g.observe({}, true, 21 * kSec));
    // An incomplete walk may have missed a thread that sleeps: open.
    EXPECT_FALSE(g.observe({}, false, 22 * kSec));
    EXPECT_TRUE(g.observe({}, true, 23 * kSec));
    GateThread opened = fresh();
    opened.untraced_open = true;
    EXPECT_FALSE(g.observe({opened}, true, 24 * kSec)) << "a new thread asleep since before";
}

TEST(UntracedSleeps, NothingWhileTracedOrWhenOnlyPreempted) {
    UntracedSleeps u;
    account_untraced(u, {true, kSec, kSec / 2, 3, 3, kSec / 2, false, false});
    // Detached, off the CPU half the time, but no voluntary switch: a run-queue wait.
    account_untraced(u, {false, kSec, kSec / 2, 0, 0, 0, false, false});
    EXPECT_EQ(u.sleeps, 0u);
    EXPECT_EQ(u.sleep_ns, 0u);
    EXPECT_EQ(u.wakeups, 0u);
    EXPECT_FALSE(u.open);
}

TEST(UntracedSleeps, DetachedSleepsCountFromSwitchesAndTimeOffTheCpu) {
    UntracedSleeps u;
    // Three sleeps, all over by the walk: 300 ms of 1 s off the CPU.
    account_untraced(u, {false, kSec, 700'000'000, 3, 0, 0, false, false});
    EXPECT_EQ(u.sleeps, 3u);
    EXPECT_EQ(u.wakeups, 3u);
    EXPECT_EQ(u.sleep_ns, 300'000'000u);
    EXPECT_FALSE(u.open);
}

TEST(UntracedSleeps, ASleepOpenAtTheWalkIsFollowedUntilTheThreadRuns) {
    UntracedSleeps u;
    // The gate's last interval: one sleep, begun 400 ms before the walk and still going.
    account_untraced(u, {false, kSec, 600'000'000, 1, 0, 0, true, false});
    EXPECT_EQ(u.sleeps, 1u);
    EXPECT_EQ(u.wakeups, 0u) << "its wakeup is the attached programs' to count";
    EXPECT_TRUE(u.open);
    // Attached again: asleep all through the next interval.
    account_untraced(u, {true, kSec, 0, 0, 0, 0, true, false});
    EXPECT_EQ(u.sleep_ns, 1'400'000'000u);
    EXPECT_TRUE(u.open);
    // It woke after 250 ms (the programs saw the wakeup and 50 us of wake latency), then ran.
    account_untraced(u, {true, kSec, 750'000'000, 0, 0, 50'000, false, false});
    EXPECT_EQ(u.sleep_ns, 1'400'000'000u + 250'000'000u - 50'000u);
    EXPECT_FALSE(u.open);
    // From there the programs see everything again.
    account_untraced(u, {true, kSec, 100, 5, 5, kSec, true, true});
    EXPECT_EQ(u.sleeps, 1u);
    EXPECT_EQ(u.sleep_ns, 1'400'000'000u + 250'000'000u - 50'000u);
}

TEST(UntracedSleeps, AnOpenSleepEndsWhereATracedOneBegins) {
    UntracedSleeps u;
    account_untraced(u, {false, kSec, 900'000'000, 1, 0, 0, true, false});
    // It woke, ran, and went to sleep again, seen: the untraced part is what the programs'
    // sleep does not cover.
    account_untraced(u, {true, kSec, 200'000'000, 1, 1, 500'000'000, true, true});
    EXPECT_EQ(u.sleep_ns, 100'000'000u + 300'000'000u);
    EXPECT_EQ(u.sleeps, 1u);
    EXPECT_FALSE(u.open);
}

// The default gate settles on lazy unless the kernel names a nohz_full CPU.
TEST(SchedGateAuto, LazyUnlessTheKernelHasNohzFullCpus) {
    EXPECT_TRUE(auto_gate_is_lazy(""));        // no CONFIG_NO_HZ_FULL: no file
    EXPECT_TRUE(auto_gate_is_lazy("\n"));      // none given at boot
    EXPECT_TRUE(auto_gate_is_lazy("(null)"));  // none given at boot, older kernels
    EXPECT_FALSE(auto_gate_is_lazy("1"));
    EXPECT_FALSE(auto_gate_is_lazy("2-7,10"));
}

}  // namespace
}  // namespace iouscope
