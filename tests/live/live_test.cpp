// Live tier: the real daemon and the real load generator on this host's kernel. Needs root and
// BPF; each test is gated on the features it uses, detected at run time.
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <thread>

#include "tests/live/harness.hpp"

using namespace live;
using namespace std::chrono;

namespace {

// Names of loaded BPF programs by id, from the kernel itself.
std::map<unsigned, std::string> loaded_programs() {
    std::map<unsigned, std::string> out;
    __u32 id = 0;
    while (bpf_prog_get_next_id(id, &id) == 0)
        if (auto name = bpf_prog_name(id)) out[id] = *name;
    return out;
}

std::set<unsigned> ours(const std::map<unsigned, std::string>& progs) {
    std::set<unsigned> ids;
    for (const auto& [id, name] : progs)
        if (name.rfind("iou_", 0) == 0) ids.insert(id);
    return ids;
}

// Whether the kernel's BTF names the kfunc the walk casts rings with, asked here without the
// daemon; nullopt without BTF.
std::optional<bool> kernel_has_rdonly_cast() {
    struct btf* vmlinux = btf__load_vmlinux_btf();
    if (!vmlinux) return std::nullopt;
    const bool has = btf__find_by_name_kind(vmlinux, "bpf_rdonly_cast", BTF_KIND_FUNC) > 0;
    btf__free(vmlinux);
    return has;
}

class Live : public ::testing::Test {
protected:
    void SetUp() override {
        if (auto why = live_tier_unavailable()) GTEST_SKIP() << *why;
    }

    // Starts the daemon and fails the test (not skips) if it does not come up.
    std::unique_ptr<Daemon> start_daemon(std::string interval = "100ms") {
        auto d =
            std::make_unique<Daemon>(std::vector<std::string>{"--sample.interval=" + interval});
        EXPECT_TRUE(d->ready()) << d->startup_log();
        return d;
    }
};

}  // namespace

TEST_F(Live, RingCountsEqualTheLoadGeneratorsGroundTruth) {
    auto d = start_daemon();
    ASSERT_TRUE(d->ready());
    // A tenth of the largest counts in a TCG guest, where 340,000 SQEs took 10 of the test's
    // 12 s: the counts are exact or not whatever their size, each still far past a ring's size.
    const unsigned long long k = in_vm_guest() ? 10 : 1;
    const unsigned long long expected[] = {200000 / k, 50000 / k, 77777 / k, 12345, 1};
    Child load({load_bin(), "--ring", "sqpoll,count=" + std::to_string(expected[0]), "--ring",
                "sqpoll,share=0,count=" + std::to_string(expected[1]), "--ring",
                "plain,count=" + std::to_string(expected[2]), "--ring",
                "sqpoll,count=12345,batch=7", "--ring", "plain,count=1", "--hold", "inf"});
    auto rings = read_load_rings(load, "ring", "done", seconds(120));
    ASSERT_EQ(rings.size(), 5u);
    for (std::size_t i = 0; i < rings.size(); ++i) ASSERT_EQ(rings[i].sqes, expected[i]);
    ASSERT_EQ(rings[0].sq_thread, rings[1].sq_thread) << "share=0 must attach to ring 0's thread";

    std::vector<Series> m;
    bool all_equal = eventually(seconds(5), [&] {
        m = d->scrape();
        for (const auto& r : rings) {
            auto sqes = find_value(m, "iouscope_ring_sqes_total", {{"ring", r.id()}});
            if (!sqes || *sqes != static_cast<double>(r.sqes)) return false;
        }
        return true;
    });
    for (const auto& r : rings) {
        std::string sq = r.sq_thread > 0 ? std::to_string(r.sq_thread) : "";
        std::map<std::string, std::string> labels{
            {"ring", r.id()}, {"pid", std::to_string(r.pid)}, {"mode", r.mode}, {"sq_thread", sq}};
        EXPECT_EQ(find_value(m, "iouscope_ring_sqes_total", labels),
                  std::optional<double>(static_cast<double>(r.sqes)))
            << r.id();
        EXPECT_EQ(find_value(m, "iouscope_ring_cqes_total", labels),
                  std::optional<double>(static_cast<double>(r.cqes)))
            << r.id();
        // A backlog only where an SQ thread consumes the ring: none for the others.
        EXPECT_EQ(find_value(m, "iouscope_ring_sq_backlog", labels),
                  r.sq_thread > 0 ? std::optional<double>(0) : std::nullopt)
            << r.id();
    }
    EXPECT_TRUE(all_equal);
    // Each ring's setup as io_uring_setup returned it to the load: the flags named, the sizes.
    const char* setup[] = {"sqpoll", "sqpoll,attach_wq", "", "sqpoll", ""};
    const unsigned flags[] = {0x2, 0x22, 0, 0x2, 0};
    for (std::size_t i = 0; i < rings.size(); ++i) {
        const auto& r = rings[i];
        EXPECT_EQ(r.setup_flags, flags[i]) << r.id();
        EXPECT_EQ(find_value(m, "iouscope_ring_info", {{"ring", r.id()}, {"setup", setup[i]}}),
                  std::optional<double>(1))
            << r.id() << " setup " << setup[i];
        EXPECT_EQ(find_value(m, "iouscope_ring_sq_entries", {{"ring", r.id()}}),
                  std::optional<double>(r.sq_entries))
            << r.id();
        EXPECT_EQ(find_value(m, "iouscope_ring_cq_entries", {{"ring", r.id()}}),
                  std::optional<double>(r.cq_entries))
            << r.id();
    }
    // Two SQ threads: ring 0 and 1 share one, ring 3 has its own.
    auto shared = find_value(m, "iouscope_sqthread_rings",
                             {{"sq_thread", std::to_string(rings[0].sq_thread)}});
    EXPECT_EQ(shared, std::optional<double>(2));
    EXPECT_EQ(find_value(m, "iouscope_sqthread_rings",
                         {{"sq_thread", std::to_string(rings[3].sq_thread)}}),
              std::optional<double>(1));
}

TEST_F(Live, SqThreadCpuMatchesSchedstat) {
    auto d = start_daemon();
    ASSERT_TRUE(d->ready());
    // Half a second of SQEs as fast as they go, then 300 ms of idle spinning before the thread
    // sleeps: 0.8 s of CPU. Bounded by time, not by a count, so that a TCG guest, 50 times
    // slower, spends as long on it as this host does.
    Child load({load_bin(), "--ring", "sqpoll,idle=300", "--duration", "500ms", "--hold", "inf"});
    auto rings = read_load_rings(load, "ring", "done", seconds(120));
    ASSERT_EQ(rings.size(), 1u);
    ASSERT_GT(rings[0].sq_thread, 0);
    // Let it finish spinning and fall asleep, so its CPU stops moving while we compare.
    std::this_thread::sleep_for(milliseconds(800));
    auto truth = schedstat_ns(rings[0].pid, rings[0].sq_thread);
    ASSERT_TRUE(truth.has_value());
    std::this_thread::sleep_for(milliseconds(300));  // at least one sample after the read
    auto m = d->scrape();
    std::map<std::string, std::string> l{{"sq_thread", std::to_string(rings[0].sq_thread)}};
    auto cpu = find_value(m, "iouscope_sqthread_cpu_seconds_total", l);
    ASSERT_TRUE(cpu.has_value());
    double want = *truth / 1e9;
    ASSERT_GT(want, 0.25);
    EXPECT_NEAR(*cpu, want, want * 0.05) << "schedstat says " << want << " s";
    std::printf("SQ thread CPU: metric %.6f s, schedstat %.6f s, difference %+.3f%%\n", *cpu, want,
                (*cpu - want) / want * 100);
    auto work = find_value(m, "iouscope_sqthread_work_seconds_total", l);
    auto spin = find_value(m, "iouscope_sqthread_spin_seconds_total", l);
    ASSERT_TRUE(work && spin);
    EXPECT_NEAR(*work + *spin, *cpu, *cpu * 0.05);
    // It spun for the whole 300 ms idle period at least once.
    EXPECT_GT(*spin, 0.2);
}

TEST_F(Live, SleepsAndWakeupsFollowPausesLongerThanIdle) {
    auto d = start_daemon();
    ASSERT_TRUE(d->ready());
    if (!probe_attached(*d, "sched_switch") || !probe_attached(*d, "sched_waking"))
        GTEST_SKIP() << "sched tracepoints not attachable on this kernel";
    // 5 ms idle, one SQE every 25 ms: the thread should sleep and be woken for nearly every SQE.
    Child load({load_bin(), "--ring", "sqpoll,idle=5,rate=40,batch=1", "--duration", "3s", "--hold",
                "inf"});
    auto setup = read_load_rings(load, "setup", "started", seconds(10));
    ASSERT_EQ(setup.size(), 1u);
    std::map<std::string, std::string> l{{"sq_thread", std::to_string(setup[0].sq_thread)}};
    double sleeps0 = -1, wakeups0 = -1;
    ASSERT_TRUE(eventually(seconds(3), [&] {
        auto m = d->scrape();
        auto s = find_value(m, "iouscope_sqthread_sleeps_total", l);
        auto w = find_value(m, "iouscope_sqthread_wakeups_total", l);
        if (!s || !w) return false;
        sleeps0 = *s;
        wakeups0 = *w;
        return true;
    }));
    auto done = read_load_rings(load, "ring", "done", seconds(20));
    ASSERT_EQ(done.size(), 1u);
    std::this_thread::sleep_for(milliseconds(300));
    auto m = d->scrape();
    double sleeps = find_value(m, "iouscope_sqthread_sleeps_total", l).value_or(-1);
    double wakeups = find_value(m, "iouscope_sqthread_wakeups_total", l).value_or(-1);
    double asleep = find_value(m, "iouscope_sqthread_sleep_seconds_total", l).value_or(-1);
    double lat_count =
        find_value(m, "iouscope_sqthread_wakeup_latency_seconds_count", l).value_or(-1);
    // Wakeups the scheduler gate kept the programs from seeing (the default, lazy gate: the
    // thread's first, before a walk found it asleep) have no latency.
    double untraced = find_value(m, "iouscope_sqthread_untraced_wakeups_total", l).value_or(-1);
    // ~100 SQEs over ~2.5 s after the first scrape; demand at least a third of them.
    std::printf(
        "paused load: +%.0f sleeps, +%.0f wakeups, %.3f s asleep, %.0f latencies, %.0f wakeups "
        "untraced\n",
        sleeps - sleeps0, wakeups - wakeups0, asleep, lat_count, untraced);
    EXPECT_GE(sleeps - sleeps0, 30) << "sleeps " << sleeps0 << " -> " << sleeps;
    EXPECT_GE(wakeups - wakeups0, 30) << "wakeups " << wakeups0 << " -> " << wakeups;
    ASSERT_GE(untraced, 0);
    EXPECT_LE(untraced, wakeups);
    // The last wakeup's latency is recorded at its switch-in, which may follow the walk.
    EXPECT_GE(lat_count, wakeups - untraced - 1);
    EXPECT_LE(lat_count, wakeups - untraced);
    EXPECT_GT(asleep, 1.0);
    // The load generator's ring thread does the wakeups (io_uring_enter with SQ_WAKEUP).
    auto by_waker =
        find_value(m, "iouscope_sqthread_wakeups_by_waker_total",
                   {{"sq_thread", l["sq_thread"]}, {"waker_pid", std::to_string(setup[0].pid)}});
    ASSERT_TRUE(by_waker.has_value());
    EXPECT_GE(*by_waker, 30);
}

TEST_F(Live, BusyThreadThatNeverPausesDoesNotSleep) {
    auto d = start_daemon();
    ASSERT_TRUE(d->ready());
    if (!probe_attached(*d, "sched_switch")) GTEST_SKIP() << "sched_switch not attachable";
    // Long idle (2 s) and a steady stream: the thread must keep polling, never sleeping.
    Child load(
        {load_bin(), "--ring", "sqpoll,idle=2000,rate=2000", "--duration", "2s", "--hold", "inf"});
    auto setup = read_load_rings(load, "setup", "started", seconds(10));
    ASSERT_EQ(setup.size(), 1u);
    std::map<std::string, std::string> l{{"sq_thread", std::to_string(setup[0].sq_thread)}};
    // The first sample that sees the thread; under TCG that can take well over the interval.
    double s0 = -1;
    eventually(seconds(10), [&] {
        s0 = find_value(d->scrape(), "iouscope_sqthread_sleeps_total", l).value_or(-1);
        return s0 >= 0;
    });
    auto done = read_load_rings(load, "ring", "done", seconds(20));
    ASSERT_EQ(done.size(), 1u);
    double s1 = find_value(d->scrape(), "iouscope_sqthread_sleeps_total", l).value_or(-1);
    ASSERT_GE(s0, 0);
    EXPECT_LE(s1 - s0, 3) << "a thread with work every 0.5 ms and 2 s idle slept";
}

namespace {

// Median fairness of one thread over several samples while the load runs.
double median_fairness(Daemon& d, const std::string& tid, int samples) {
    std::vector<double> v;
    for (int i = 0; i < samples; ++i) {
        std::this_thread::sleep_for(milliseconds(520));
        if (auto f = find_value(d.scrape(), "iouscope_sqthread_fairness", {{"sq_thread", tid}}))
            v.push_back(*f);
    }
    if (v.empty()) return -1;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

TEST_F(Live, FairnessIsNearOneForEqualRingsAndLowerForUnequal) {
    auto d = start_daemon("500ms");
    ASSERT_TRUE(d->ready());
    double equal = 0, unequal = 0;
    {
        Child load({load_bin(), "--ring", "sqpoll,rate=2000", "--ring", "sqpoll,share=0,rate=2000",
                    "--duration", "5s"});
        auto setup = read_load_rings(load, "setup", "started", seconds(10));
        ASSERT_EQ(setup.size(), 2u);
        equal = median_fairness(*d, std::to_string(setup[0].sq_thread), 7);
    }
    {
        Child load({load_bin(), "--ring", "sqpoll,rate=4000", "--ring", "sqpoll,share=0,rate=200",
                    "--duration", "5s"});
        auto setup = read_load_rings(load, "setup", "started", seconds(10));
        ASSERT_EQ(setup.size(), 2u);
        unequal = median_fairness(*d, std::to_string(setup[0].sq_thread), 7);
    }
    std::printf(
        "median fairness: equal rates %.3f, 4000:200 rates %.3f (Jain ideal 1.000, 0.550)\n", equal,
        unequal);
    // Jain's index for 4000:200 is 0.55; for equal rates 1.
    EXPECT_GE(equal, 0.95);
    EXPECT_LE(unequal, 0.7);
    EXPECT_GT(unequal, 0.45);
}

TEST_F(Live, ScrapePassesPromtool) {
    if (system("command -v promtool >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "promtool not installed";
    auto d = start_daemon();
    ASSERT_TRUE(d->ready());
    // A comm with quotes and a backslash: the exposition must still be valid.
    std::string odd = std::filesystem::temp_directory_path() / "ld\"q\\x";
    std::filesystem::copy_file(load_bin(), odd, std::filesystem::copy_options::overwrite_existing);
    Child load({odd, "--ring", "sqpoll,count=1000", "--ring", "plain,count=10", "--hold", "inf"});
    ASSERT_EQ(read_load_rings(load, "ring", "done", seconds(30)).size(), 2u);
    std::this_thread::sleep_for(milliseconds(300));
    auto r = http_get(d->url());
    ASSERT_EQ(r.status, 200);
    EXPECT_NE(r.body.find(R"(comm="ld\"q\\x")"), std::string::npos);
    std::string file = std::filesystem::temp_directory_path() / "iouscope-scrape.txt";
    std::ofstream(file) << r.body;
    EXPECT_EQ(system(("promtool check metrics < " + file + " >/dev/null 2>&1").c_str()), 0)
        << r.body;
    std::filesystem::remove(odd);
}

TEST_F(Live, SigtermDetachesEveryProgram) {
    // Only the programs this daemon added are checked, so another tool loading programs with
    // the same prefix at the same time cannot disturb the result.
    auto before = ours(loaded_programs());
    std::set<unsigned> added;
    {
        auto d = start_daemon();
        ASSERT_TRUE(d->ready());
        auto during = ours(loaded_programs());
        std::set_difference(during.begin(), during.end(), before.begin(), before.end(),
                            std::inserter(added, added.end()));
        // sched_switch, sched_waking (one program per wake) and io_uring_create, and
        // io_uring_cqe_overflow where the kernel has it (5.19+).
        const std::size_t overflow = probe_attached(*d, "cqe_overflow") ? 1 : 0;
        EXPECT_EQ(added.size(), 4u + overflow)
            << "expected the iterator and " << 3 + overflow << " tracepoint programs";
        d->process().signal(SIGTERM);
        EXPECT_EQ(d->process().wait(seconds(10)), std::optional<int>(0));
    }
    // The kernel frees tracing programs from a workqueue after the last reference goes, so they
    // may be listed for a moment after the daemon has exited.
    std::set<unsigned> left;
    bool gone = eventually(seconds(5), [&] {
        auto after = ours(loaded_programs());
        left.clear();
        std::set_intersection(added.begin(), added.end(), after.begin(), after.end(),
                              std::inserter(left, left.end()));
        return left.empty();
    });
    EXPECT_TRUE(gone) << left.size() << " programs left behind";
}

// The walk casts rings (bpf_rdonly_cast, plain loads) wherever the kernel's BTF has the kfunc,
// reads them with probe reads elsewhere (5.10 and 6.1 in the VM tier), and says which.
TEST_F(Live, TheRingWalkCastsRingsWhereTheKernelHasTheKfunc) {
    const auto has_cast = kernel_has_rdonly_cast();
    ASSERT_TRUE(has_cast.has_value()) << "no BTF at /sys/kernel/btf/vmlinux";
    const bool cast = *has_cast;
    auto d = start_daemon();
    ASSERT_TRUE(d->ready());
    const std::string want = cast ? "the ring walk reads rings with plain loads (bpf_rdonly_cast)"
                                  : "the ring walk reads rings with probe reads";
    EXPECT_NE(d->startup_log().find(want), std::string::npos) << d->startup_log();
}

// --version is a bug report's header: the build, the kernel, the walk's reads and, as root,
// every probe's attach kind, the same probes --probe-report lists.
TEST_F(Live, VersionNamesTheBuildTheKernelAndEveryProbe) {
    const auto has_cast = kernel_has_rdonly_cast();
    ASSERT_TRUE(has_cast.has_value()) << "no BTF at /sys/kernel/btf/vmlinux";
    const bool cast = *has_cast;
    std::string out;
    FILE* p = popen((build_dir() + "/iouscoped --version 2>/dev/null").c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[4096];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ASSERT_EQ(pclose(p), 0) << out;
    EXPECT_EQ(out.rfind("iouscoped " IOUSCOPE_VERSION "\n", 0), 0u) << out;
    for (const char* line :
         {"\ncommit:     ", "\nlibbpf:     built against 1.", "\nlibraries:  prometheus-cpp ",
          "\nkernel:     Linux ", "\nBTF:        yes\n"})
        EXPECT_NE(out.find(line), std::string::npos) << line << " in\n" << out;
    if (std::filesystem::exists(IOUSCOPE_SOURCE_DIR "/.git")) {
        EXPECT_EQ(out.find("commit:     unknown"), std::string::npos) << "built from a checkout";
    }
    EXPECT_NE(out.find(cast ? "ring walk:  plain loads" : "ring walk:  probe reads"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("\niter_rings               iter     attached"), std::string::npos) << out;
}

TEST_F(Live, StartupErrorsAreClear) {
    // Busy address: take a port, then ask the daemon for it.
    int port = free_port();
    Daemon first({"--sample.interval=1s"});
    ASSERT_TRUE(first.ready());
    std::string busy = first.url().substr(7);  // 127.0.0.1:PORT/metrics
    busy = busy.substr(0, busy.find('/'));
    Child second({build_dir() + "/iouscoped", "--web.listen-address=" + busy}, true);
    EXPECT_EQ(second.wait(seconds(10)), std::optional<int>(1));
    EXPECT_NE(second.drain(seconds(1)).find("cannot serve on " + busy), std::string::npos);

    Child bad({build_dir() + "/iouscoped", "--web.listen-address=127.0.0.1:" + std::to_string(port),
               "--frobnicate"},
              true);
    EXPECT_EQ(bad.wait(seconds(10)), std::optional<int>(2));
    EXPECT_NE(bad.drain(seconds(1)).find("--frobnicate"), std::string::npos);

    // Without privileges: a clear message about root or CAP_BPF, and exit status 1.
    if (system("command -v setpriv >/dev/null 2>&1") == 0) {
        Child unpriv({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                      "--inh-caps=-all", "--bounding-set=-all", build_dir() + "/iouscoped",
                      "--web.listen-address=127.0.0.1:" + std::to_string(free_port())},
                     true);
        EXPECT_EQ(unpriv.wait(seconds(10)), std::optional<int>(1));
        EXPECT_NE(unpriv.drain(seconds(1)).find("CAP_BPF"), std::string::npos);
    }
}
