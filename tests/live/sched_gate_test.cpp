// Live tier: the scheduler gate, which takes sched_switch and sched_waking off SQ threads that
// poll without sleeping and puts them back when one sleeps (model/sched_gate.hpp): from a
// thread's birth (on), lazily (lazy), beside the deep tier, on a shared CPU and on a nohz_full
// CPU. Each test drives its own ring through liburing, so the ground truth is exact.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <liburing.h>
#include <sched.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/live/sched_fixture.hpp"

using namespace live;
using namespace std::chrono;

// The links process `pid` holds to its sched programs (names iou_sched_*), from its fdinfo: what
// the scheduler gate drops and remakes, while the programs stay loaded.
static int sched_links(pid_t pid) {
    return links_of(pid, "iou_sched_");
}

// The scheduler gate that follows a thread from its birth (--probes.sched-gate=on,
// model/sched_gate.hpp) over a thread that polls, then sleeps once: the programs come off while
// it polls, and the sleep they did not see begin is still counted, once, and for about the time
// it lasted.
TEST_F(Sched, GateDetachesWhileTheThreadPollsAndCountsTheSleepItMissed) {
    auto d = start_daemon("100ms", {kFromBirth}, {"sched_switch", "sched_waking"});
    if (!d) return;
    // 200 ms of idle, an SQE every 50 ms: the thread polls all along and never sleeps.
    constexpr double kIdle = 0.2;
    open_sqpoll(static_cast<unsigned>(kIdle * 1000));
    submit_nop();
    auto l = thread_labels(*d);
    ASSERT_FALSE(l.empty()) << "no walk saw ring " << ring_id_;
    const std::map<std::string, std::string> gate{{"probe", "sched_switch"}};
    auto gated = [&] { return value(d->scrape(), "iouscope_probe_gated", gate) == 1; };
    // 5 s of polling closes it; a TCG guest's walks come late.
    EXPECT_EQ(sched_links(d->process().pid()), 2);
    ASSERT_TRUE(poll_for(seconds(30), gated)) << "the gate never closed over a polling thread";
    EXPECT_EQ(sched_links(d->process().pid()), 0) << "gated, yet still attached";
    struct Counts {
        double sleeps, blocks, switches, sleep_s;
    };
    auto counts = [&](const std::vector<Series>& m) {
        return Counts{value(m, "iouscope_sqthread_sleeps_total", l),
                      value(m, "iouscope_sqthread_blocks_total", l),
                      value(m, "iouscope_sqthread_voluntary_switches_total", l),
                      value(m, "iouscope_sqthread_sleep_seconds_total", l)};
    };
    const Counts a = counts(d->scrape());
    ASSERT_GE(a.switches, 0);
    EXPECT_EQ(a.sleeps + a.blocks, a.switches) << "the programs missed a switch before the gate";

    // Silence: the thread polls for its idle time, sleeps, and the SQE after it wakes it.
    const auto pause_start = steady_clock::now();
    std::this_thread::sleep_for(milliseconds(1500));
    const double pause = duration<double>(steady_clock::now() - pause_start).count();
    // Polling on while the counts settle: a sleep after the test's last SQE would be one more,
    // still open, and never settle.
    std::atomic<bool> done{false};
    std::thread poller([&] { poll_for(seconds(60), [&] { return done.load(); }); });
    const auto m = settled_scrape(*d, seconds(10), [&](const std::vector<Series>& s) {
        const Counts c = counts(s);
        return std::vector<double>{c.sleeps, c.switches, c.sleep_s};
    });
    done = true;
    poller.join();
    const Counts b = counts(m);
    const double slept = b.sleep_s - a.sleep_s;
    std::printf(
        "pause %.3f s, idle %.1f s: %.0f sleep(s), %.0f voluntary switch(es), %.3f s "
        "asleep (%.3f s before, %.3f s after)\n",
        pause, kIdle, b.sleeps - a.sleeps, b.switches - a.switches, slept, a.sleep_s, b.sleep_s);
    EXPECT_EQ(b.switches - a.switches, 1) << "the thread did not sleep just once in the pause";
    EXPECT_EQ(b.sleeps - a.sleeps, 1) << "the sleep begun under the gate was not counted once";
    EXPECT_EQ(b.sleeps + b.blocks, b.switches) << "a voluntary switch counted twice or not at all";
    // It slept from the end of its idle time to the SQE after the pause: off its CPU no longer
    // than the pause, and all of it but the idle time, less a run-queue wait or two.
    EXPECT_LE(slept, pause + 0.05);
    EXPECT_GE(slept, pause - kIdle - 0.1);
    EXPECT_EQ(value(m, "iouscope_probe_gated", gate), 0) << "the sleep did not open the gate";
    EXPECT_EQ(sched_links(d->process().pid()), 2) << "open, yet not attached again";
}

// The SQ threads of the machine, from their names (iou-sqp-PID).
int sq_threads_on_machine() {
    int n = 0;
    std::error_code ec;
    for (const auto& p : std::filesystem::directory_iterator("/proc", ec)) {
        std::error_code tec;
        for (const auto& t : std::filesystem::directory_iterator(p.path() / "task", tec)) {
            std::ifstream f(t.path() / "comm");
            std::string comm;
            if (std::getline(f, comm) && comm.rfind("iou-sqp-", 0) == 0) ++n;
        }
    }
    return n;
}

// The lazy gate (--probes.sched-gate=lazy): detached while the machine has no SQ thread, kept
// detached while a new thread polls from its birth, attached once the thread has slept, the
// sleep it did not see begin counted once, and detached again at once when the thread is gone.
TEST_F(Sched, LazyGateFollowsAThreadOnlyOnceItSlept) {
    // An earlier test's ring exits in its exit work, which takes its thread seconds later.
    int others = 0;
    eventually(seconds(20), [&] { return (others = sq_threads_on_machine()) == 0; });
    if (others)
        GTEST_SKIP() << others << " SQ thread(s) of other processes: the gate follows them too";
    auto d = start_daemon("100ms", {"--probes.sched-gate=lazy"}, {"sched_switch", "sched_waking"});
    if (!d) return;
    const std::map<std::string, std::string> gate{{"probe", "sched_switch"}};
    auto gated = [&] { return value(d->scrape(), "iouscope_probe_gated", gate) == 1; };
    ASSERT_TRUE(eventually(seconds(10), gated)) << "no SQ thread, yet the gate stayed open";
    EXPECT_EQ(sched_links(d->process().pid()), 0);

    // An SQE every 50 ms against 1 s of idle: the thread never sleeps, even when a slow guest
    // delays the test's next SQE by tenths of a second.
    open_sqpoll(1000);
    submit_nop();
    auto l = thread_labels(*d);
    ASSERT_FALSE(l.empty()) << "no walk saw ring " << ring_id_;
    // Two seconds of walks over a new thread that polls: none may open the gate.
    int open_walks = 0;
    poll_for(seconds(2), [&] {
        open_walks += !gated();
        return false;
    });
    EXPECT_EQ(open_walks, 0) << "a new thread that never slept opened the gate";
    EXPECT_EQ(sched_links(d->process().pid()), 0);
    auto count = [&](const std::vector<Series>& m, const char* name) { return value(m, name, l); };
    const auto m0 = d->scrape();
    const double switches0 = count(m0, "iouscope_sqthread_voluntary_switches_total");
    const double sleeps0 = count(m0, "iouscope_sqthread_sleeps_total");
    // Its setup's switches (1 or 2) were counted from its count, as sleeps.
    EXPECT_EQ(sleeps0 + count(m0, "iouscope_sqthread_blocks_total"), switches0);

    // Silence: the thread sleeps after its idle time, and the next SQE wakes it.
    std::this_thread::sleep_for(milliseconds(2500));
    ASSERT_TRUE(poll_for(seconds(10), [&] { return !gated(); }))
        << "the thread slept, and the gate stayed closed";
    std::atomic<bool> done{false};
    std::thread poller([&] { poll_for(seconds(60), [&] { return done.load(); }); });
    const auto m = settled_scrape(*d, seconds(10), [&](const std::vector<Series>& s) {
        return std::vector<double>{count(s, "iouscope_sqthread_sleeps_total"),
                                   count(s, "iouscope_sqthread_voluntary_switches_total")};
    });
    done = true;
    poller.join();
    const double sleeps = count(m, "iouscope_sqthread_sleeps_total") - sleeps0;
    const double switches = count(m, "iouscope_sqthread_voluntary_switches_total") - switches0;
    std::printf("setup: %.0f voluntary switch(es); the pause: %.0f sleep(s), %.0f switch(es)\n",
                switches0, sleeps, switches);
    EXPECT_EQ(switches, 1) << "the thread did not sleep just once in the pause";
    EXPECT_EQ(sleeps, 1) << "the sleep begun under the gate was not counted once";
    EXPECT_EQ(sched_links(d->process().pid()), 2) << "open, yet not attached again";

    // The ring closed, its thread gone: nothing to follow, detached at once.
    io_uring_queue_exit(&ring_);
    ring_open_ = false;
    // The thread exits in the ring's exit work, which a slow guest runs late.
    EXPECT_TRUE(eventually(seconds(15), gated)) << "no SQ thread left, yet the gate stayed open";
    EXPECT_EQ(sched_links(d->process().pid()), 0);
}

// The deep tier under the lazy gate: gated like the default tier, unless loop_passes is attached
// (fentry or kprobes on io_sq_tw), whose pass brackets sched_switch corrects at every switch.
TEST_F(Sched, DeepTierKeepsTheGateOpenOnlyForLoopPasses) {
    int others = 0;
    eventually(seconds(20), [&] { return (others = sq_threads_on_machine()) == 0; });
    if (others)
        GTEST_SKIP() << others << " SQ thread(s) of other processes: the gate follows them too";
    auto d = start_daemon("100ms", {"--probes.deep", "--probes.sched-gate=lazy"},
                          {"sched_switch", "sched_waking"});
    if (!d) return;
    const std::map<std::string, std::string> gate{{"probe", "sched_switch"}};
    auto gated = [&] { return value(d->scrape(), "iouscope_probe_gated", gate) == 1; };
    if (!probe_attached(*d, "loop_passes")) {
        // No SQ thread: lazy closes at the first complete walk.
        EXPECT_TRUE(eventually(seconds(10), gated)) << "deep tier without loop_passes, not gated";
        EXPECT_EQ(sched_links(d->process().pid()), 0);
        return;
    }
    // Twenty walks or more with no SQ thread, each of which would close a lazy gate.
    std::this_thread::sleep_for(seconds(3));
    EXPECT_FALSE(gated()) << "loop_passes attached, yet the gate closed";
    EXPECT_EQ(sched_links(d->process().pid()), 2);
    EXPECT_NE(d->startup_log().find("scheduler gate off: probe loop_passes"), std::string::npos)
        << "the daemon did not say why the gate is off";
}

// While the gate is closed, sched_switch does not see a polling thread switched out and back in
// by a task that comes to share its CPU. The note of its last seen switch-in must then stop
// counting: read as if the thread had kept the CPU since, it would be charged the whole CPU,
// twice its share.
TEST_F(Sched, GatedThreadSharingItsCpuIsChargedOnlyItsShare) {
    if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs two CPUs";
    auto d = start_daemon("200ms", {}, {"sched_switch", "sched_waking"});
    if (!d) return;
    ASSERT_TRUE(pin_self(0));
    open_sqpoll(60'000, 1);  // 60 s of idle: it polls all through the test
    submit_nop();
    auto l = thread_labels(*d);
    ASSERT_FALSE(l.empty()) << "no walk saw ring " << ring_id_;
    const pid_t tid = std::stoi(l.at("sq_thread"));
    const std::map<std::string, std::string> gate{{"probe", "sched_switch"}};
    const bool closed = eventually(seconds(30), [&] {
        std::this_thread::sleep_for(milliseconds(100));
        return value(d->scrape(), "iouscope_probe_gated", gate) == 1;
    });
    ASSERT_TRUE(closed) << "the gate never closed over a thread polling all along";
    // The hog starts once the gate is closed: the thread, alone on its CPU until now, was on it
    // at its last switch sched_switch saw, and every switch from here goes unseen.
    std::atomic<bool> stop{false};
    std::thread hog([&] {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(1, &one);
        sched_setaffinity(0, sizeof one, &one);
        while (!stop.load(std::memory_order_relaxed)) {
        }
    });
    auto sample = [&] {
        const auto m = d->scrape();
        return std::make_pair(value(m, "iouscope_sqthread_cpu_seconds_total", l),
                              schedstat_ns(tid, tid).value_or(0) / 1e9);
    };
    const auto [c0, s0] = sample();
    std::this_thread::sleep_for(seconds(3));
    const auto [c1, s1] = sample();
    const bool still = value(d->scrape(), "iouscope_probe_gated", gate) == 1;
    stop = true;
    hog.join();
    ASSERT_TRUE(still) << "the gate opened: the thread slept";
    std::printf(
        "sharing CPU 1 with a busy task, gated: daemon %.3f s of CPU, sum_exec_runtime "
        "%.3f s, in 3 s\n",
        c1 - c0, s1 - s0);
    ASSERT_GT(s1 - s0, 0.3) << "the thread hardly ran: no share to compare";
    // Scrapes are a sample (200 ms) apart from the schedstat reads, and the share moves little.
    EXPECT_NEAR(c1 - c0, s1 - s0, 0.1 * 3);
    EXPECT_LT(c1 - c0, 0.8 * 3) << "charged the whole CPU: a switch-in note outlived its stretch";
}

// On a nohz_full CPU a thread that never leaves it has its sum_exec_runtime updated by the remote
// tick only, once a second; per-interval CPU read from it alone aliases to 0, 1 or 2 s. Booted
// for it by: tests/vm/run --append "nohz_full=1 isolcpus=1 rcu_nocbs=1".
TEST_F(Sched, PinnedThreadOnANohzFullCpuIsChargedItsWallTime) {
    std::ifstream f("/sys/devices/system/cpu/nohz_full");
    std::string list;
    std::getline(f, list);
    const auto isolated = parse_cpulist(list);
    if (isolated.empty() || isolated.front() == 0)
        GTEST_SKIP() << "no nohz_full CPU besides CPU 0 (boot with nohz_full=1 isolcpus=1)";
    // The thread starts after the daemon: its switch-in is where its uncharged time counts from.
    auto d = start_daemon("500ms", {}, {"sched_switch"});
    if (!d) return;

    const int cpu = isolated.front();
    ASSERT_TRUE(pin_self(0));
    // 60 s of idle, restarted by an SQE every second: the thread never sleeps in the test and
    // polls its CPU at 100 %.
    open_sqpoll(60'000, cpu);
    submit_nop();
    auto l = thread_labels(*d);
    ASSERT_FALSE(l.empty()) << "no walk saw ring " << ring_id_;
    const pid_t tid = std::stoi(l.at("sq_thread"));
    // The kernel's own answer first: the thread's CPU clock (task_sched_runtime(), readable for
    // an io-thread of this process) over ten 200 ms windows of polling. Under TCG the vCPUs'
    // clocks can disagree: the kernel then charges a polling thread anywhere from half to
    // several times the wall time in a window, and its CPU time has no wall time to be compared
    // with.
    const clockid_t thread_clock = static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6);
    auto cpu_now = [&] {
        timespec ts{};
        return clock_gettime(thread_clock, &ts) == 0 ? ts.tv_sec + ts.tv_nsec / 1e9 : -1.0;
    };
    if (cpu_now() < 0)
        GTEST_SKIP() << "the SQ thread's CPU clock is not readable here (a kthread SQ thread)";
    double klo = 1e9, khi = 0;
    for (int i = 0; i < 10; ++i) {
        const double c0 = cpu_now();
        const auto w0 = steady_clock::now();
        std::this_thread::sleep_for(milliseconds(200));
        const double rate = (cpu_now() - c0) / duration<double>(steady_clock::now() - w0).count();
        klo = std::min(klo, rate);
        khi = std::max(khi, rate);
        if (i % 5 == 4) {
            submit_nop();
            reap();
        }
    }
    const double kernel_rate = (klo + khi) / 2;
    if (klo < 0.95 || khi > 1.05)
        GTEST_SKIP() << "the kernel charged the polling thread " << klo << " .. " << khi
                     << " s of CPU per second of wall time: this guest's CPU clocks disagree";

    // Consecutive samples: the daemon's CPU over each interval against the interval itself,
    // and beside it what sum_exec_runtime alone (schedstat) gave over about the same interval.
    struct Point {
        double t, cpu, schedstat;
    };
    std::vector<Point> points;
    double last_t = -1;
    const double sleeps_before = value(d->scrape(), "iouscope_sqthread_sleeps_total", l);
    // Long enough for a handful of samples in a TCG guest, where the one CPU left for the
    // daemon, the test and everything else gets a sample through every 1 to 2 s.
    const auto end = steady_clock::now() + seconds(14);
    auto next_nop = steady_clock::now();
    while (steady_clock::now() < end) {
        if (steady_clock::now() >= next_nop) {
            submit_nop();
            reap();
            next_nop += seconds(1);
        }
        auto m = d->scrape();
        const double t = value(m, "iouscope_last_sample_timestamp_seconds", {});
        const double c = value(m, "iouscope_sqthread_cpu_seconds_total", l);
        const auto ss = schedstat_ns(tid, tid);
        if (t > last_t && c >= 0 && ss) {
            points.push_back({t, c, *ss / 1e9});
            last_t = t;
        }
        std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_GE(points.size(), 4u);
    const auto last = d->scrape();
    EXPECT_EQ(value(last, "iouscope_sqthread_sleeps_total", l), sleeps_before)
        << "the thread slept: the test's premise (it polls all along) does not hold";
    // 14 s of polling close the scheduler gate: from then on sched_switch sees no switch-in, and
    // the CPU stays exact only because the switch counts still match the note it left.
    EXPECT_EQ(value(last, "iouscope_probe_gated", {{"probe", "sched_switch"}}), 1)
        << "the gate did not close over a thread polling all along";
    double lo = 1e9, hi = 0, slo = 1e9, shi = 0;
    for (std::size_t i = 1; i < points.size(); ++i) {
        const double wall = points[i].t - points[i - 1].t;
        const double r = (points[i].cpu - points[i - 1].cpu) / wall;
        const double sr = (points[i].schedstat - points[i - 1].schedstat) / wall;
        lo = std::min(lo, r);
        hi = std::max(hi, r);
        slo = std::min(slo, sr);
        shi = std::max(shi, sr);
        // A few % either way: the sample's timestamp and its walk are not the same instant, and
        // the running part is read against a clock up to a tick old.
        EXPECT_LE(r, 1.04) << "interval " << i << " of " << wall << " s";
        EXPECT_GE(r, 0.90) << "interval " << i << " of " << wall << " s";
    }
    if (::testing::Test::HasFailure())
        for (const auto& p : points)
            std::printf("sample at %.3f: daemon CPU %.3f s, sum_exec_runtime %.3f s\n", p.t, p.cpu,
                        p.schedstat);
    std::printf(
        "nohz_full CPU %d, %zu sample intervals: CPU/wall %.3f .. %.3f "
        "(sum_exec_runtime alone: %.3f .. %.3f; the kernel's thread clock: %.3f)\n",
        cpu, points.size() - 1, lo, hi, slo, shi, kernel_rate);
}
