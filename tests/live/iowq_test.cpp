// io-wq workers, live. With IORING_REGISTER_IOWQ_MAX_WORKERS at 1, each thread that punts has
// exactly one worker of the account its requests need, and the last worker of an account stays
// past its idle timeout until its io-wq goes: so the live workers per account, their limit,
// the io-wqs, the workers created and those that exited are known exactly from what the load
// does. Their CPU time is held to /proc's schedstat of the same threads.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "tests/live/harness.hpp"

using namespace live;
using namespace std::chrono;

namespace {

class IoWq : public ::testing::Test {
protected:
    void SetUp() override {
        if (auto why = live_tier_unavailable()) GTEST_SKIP() << *why;
    }
};

using Labels = std::map<std::string, std::string>;

// The CPU time, in seconds, of the process's io-wq workers now (schedstat's first field is the
// kernel's sum_exec_runtime, the figure the daemon reads).
double procfs_worker_cpu(pid_t pid) {
    double sum = 0;
    std::error_code ec;
    for (const auto& t :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
        if (read_first_line(t.path() / "comm").rfind("iou-wrk-", 0) != 0) continue;
        std::istringstream in(read_first_line(t.path() / "schedstat"));
        unsigned long long ns = 0;
        if (in >> ns) sum += static_cast<double>(ns) / 1e9;
    }
    return sum;
}

// The whole process's CPU time (utime + stime of every thread, live or gone), in seconds; the
// kernel reports it in clock ticks, so it may fall short of the exact figure by two ticks.
double procfs_process_cpu(pid_t pid) {
    std::istringstream in(read_first_line("/proc/" + std::to_string(pid) + "/stat"));
    std::string field;
    // comm may hold spaces: skip to its closing parenthesis, then fields 3.. follow.
    std::string line = in.str();
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14) utime = std::stoull(field);
        if (i == 15) stime = std::stoull(field);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A process's io-wq series (of the account kind, where given), -1 when absent.
double iowq_value(const std::vector<Series>& m, pid_t pid, const std::string& name,
                  const std::string& kind = "") {
    Labels l{{"pid", std::to_string(pid)}};
    if (!kind.empty()) l["kind"] = kind;
    return find_value(m, name, l).value_or(-1);
}

}  // namespace

// Two rings punt every NOP (IOSQE_ASYNC), each from its own thread: one bound worker per thread.
// The second ring's stuck= pipe reads, punted too, are submitted by the main thread: one unbound
// worker in its io-wq. When the ring threads end, their io-wqs and workers go with them.
TEST_F(IoWq, WorkersLimitsAndExitsEqualTheLoadsThreads) {
    Daemon d({"--sample.interval=100ms", "--probes.requests"});
    ASSERT_TRUE(d.ready()) << d.startup_log();
    REQUIRE_PROBE(d, probe_attached(d, "iowq_workers"), "iowq_workers");
    const std::string ring = "plain,async,max_workers=1,rate=2000";
    Child load({load_bin(), "--ring", ring, "--ring", ring + ",stuck=2", "--duration",
                in_vm_guest() ? "8s" : "3s", "--hold", "inf"});
    const auto setup = read_load_rings(load, "setup", "started", seconds(60));
    ASSERT_EQ(setup.size(), 2u);
    const pid_t pid = setup[0].pid;
    const auto get = [&](const std::vector<Series>& m, const std::string& name,
                         const std::string& kind = "") { return iowq_value(m, pid, name, kind); };
    std::vector<Series> m;
    ASSERT_TRUE(eventually(seconds(in_vm_guest() ? 6 : 2),
                           [&] {
                               m = d.scrape();
                               return get(m, "iouscope_iowq_workers", "bound") == 2 &&
                                      get(m, "iouscope_iowq_workers", "unbound") == 1;
                           }))
        << "bound " << get(m, "iouscope_iowq_workers", "bound") << ", unbound "
        << get(m, "iouscope_iowq_workers", "unbound");
    EXPECT_EQ(get(m, "iouscope_iowq_max_workers", "bound"), 1);
    EXPECT_EQ(get(m, "iouscope_iowq_max_workers", "unbound"), 1);
    EXPECT_EQ(get(m, "iouscope_iowq_queues"), 3);
    EXPECT_EQ(get(m, "iouscope_iowq_workers_created_total"), 3);
    EXPECT_EQ(get(m, "iouscope_iowq_workers_exited_total"), 0);
    // The CPU of the same threads, read from /proc before and after a sample the scrape shows.
    const double before = procfs_worker_cpu(pid);
    std::this_thread::sleep_for(milliseconds(300));
    m = d.scrape();
    const double after = procfs_worker_cpu(pid);
    const double cpu = get(m, "iouscope_iowq_worker_cpu_seconds_total");
    EXPECT_GE(cpu, before - 1e-6);
    EXPECT_LE(cpu, after + 1e-6);
    EXPECT_GT(cpu, 0);

    // The run ends and the ring threads with it: their workers exit, main's stays. From 7.x
    // the exit program runs preemptible, and a run of it preempted on a CPU makes the next
    // there a recursion miss (docs/ARCHITECTURE.md, "Misses"): an exit of any task missed so
    // is an exit the count lacks, so the count is exact less the probe's misses, and exact
    // where there were none (a worker's exit missed so was seen once on sid, 7.2, in CI).
    ASSERT_EQ(read_load_rings(load, "ring", "done", seconds(120)).size(), 2u);
    const auto missed = [&] {
        return find_value(m, "iouscope_probe_missed_total", {{"probe", "iowq_workers"}})
            .value_or(0);
    };
    const auto exited = [&] { return get(m, "iouscope_iowq_workers_exited_total"); };
    EXPECT_TRUE(eventually(seconds(5),
                           [&] {
                               m = d.scrape();
                               return exited() == 2 ||
                                      (exited() >= 2 - missed() &&
                                       get(m, "iouscope_iowq_workers", "bound") == 0);
                           }))
        << "exited " << exited() << " (" << missed() << " exits missed), created "
        << get(m, "iouscope_iowq_workers_created_total") << ", bound "
        << get(m, "iouscope_iowq_workers", "bound") << ", unbound "
        << get(m, "iouscope_iowq_workers", "unbound") << ", exits map "
        << find_value(m, "iouscope_map_entries", {{"map", "iowq_exits"}}).value_or(-1)
        << ", dropped "
        << find_value(m, "iouscope_map_overflow_total", {{"map", "iowq_exits"}}).value_or(-1);
    std::printf("workers exited: %g of 2, exits missed: %g\n", exited(), missed());
    EXPECT_LE(exited(), 2);
    if (missed() == 0) {
        EXPECT_EQ(exited(), 2);
    }
    EXPECT_EQ(get(m, "iouscope_iowq_workers", "bound"), 0);
    EXPECT_EQ(get(m, "iouscope_iowq_workers", "unbound"), 1);
    EXPECT_EQ(get(m, "iouscope_iowq_workers_created_total"), 3);
    EXPECT_EQ(get(m, "iouscope_iowq_queues"), 1);
    // The exited workers' time is kept: never below what was counted, never above the whole
    // process's time (in ticks: two of slack).
    const double cpu_after = get(m, "iouscope_iowq_worker_cpu_seconds_total");
    EXPECT_GE(cpu_after, cpu);
    EXPECT_GE(cpu_after, procfs_worker_cpu(pid) - 1e-6);
    EXPECT_LE(cpu_after, procfs_process_cpu(pid) + 2.0 / sysconf(_SC_CLK_TCK));

    // The process goes, and its counts with it: no series, no entry in the exits map.
    load.signal(SIGTERM);
    ASSERT_EQ(load.wait(seconds(30)), std::optional<int>(0));
    EXPECT_TRUE(eventually(seconds(5),
                           [&] {
                               m = d.scrape();
                               return get(m, "iouscope_iowq_workers_exited_total") == -1 &&
                                      find_value(m, "iouscope_map_entries",
                                                 {{"map", "iowq_exits"}}) ==
                                          std::optional<double>(0);
                           }))
        << "map entries: "
        << find_value(m, "iouscope_map_entries", {{"map", "iowq_exits"}}).value_or(-1);
}

// A splice cannot be armed for poll, so each blocked= splice holds an io-wq worker of the
// unbound account until its ring closes: five splices, five workers; with max_workers=2, two
// workers and three requests queued behind them. The requests in flight on io-wq sit beside the
// workers (5.19+, where completions are seen), and the rings' cancellation on close ends them.
TEST_F(IoWq, EachBlockedRequestHoldsAWorkerUpToTheLimit) {
    Daemon d({"--sample.interval=100ms", "--probes.requests"});
    ASSERT_TRUE(d.ready()) << d.startup_log();
    REQUIRE_PROBE(d, probe_attached(d, "iowq_workers"), "iowq_workers");
    const bool timed = probe_attached(d, "req_complete");
    Child wide({load_bin(), "--ring", "plain,count=1,blocked=5", "--hold", "inf"});
    Child capped({load_bin(), "--ring", "plain,count=1,blocked=5,max_workers=2", "--hold", "inf"});
    const auto w = read_load_rings(wide, "ring", "done", seconds(60));
    const auto c = read_load_rings(capped, "ring", "done", seconds(60));
    ASSERT_EQ(w.size(), 1u);
    ASSERT_EQ(c.size(), 1u);
    ASSERT_EQ(w[0].blocked, 5u);
    const auto get = [](const std::vector<Series>& m, const LoadRing& r, const std::string& name,
                        const std::string& kind = "") { return iowq_value(m, r.pid, name, kind); };
    // One sample walks the rings before the workers: a ring set up between the two walks has
    // its workers in that sample and itself only in the next (seen once on the seeds guest).
    const auto walked = [](const std::vector<Series>& m, const LoadRing& r) {
        return find_value(m, "iouscope_ring_sqes_total", {{"ring", r.id()}}).has_value();
    };
    std::vector<Series> m;
    ASSERT_TRUE(eventually(seconds(in_vm_guest() ? 6 : 2),
                           [&] {
                               m = d.scrape();
                               return get(m, w[0], "iouscope_iowq_workers", "unbound") == 5 &&
                                      get(m, c[0], "iouscope_iowq_workers", "unbound") == 2 &&
                                      walked(m, w[0]) && walked(m, c[0]);
                           }))
        << "unbound workers " << get(m, w[0], "iouscope_iowq_workers", "unbound") << " and "
        << get(m, c[0], "iouscope_iowq_workers", "unbound") << ", rings walked " << walked(m, w[0])
        << " and " << walked(m, c[0]);
    for (const auto& r : {w[0], c[0]}) {
        EXPECT_EQ(get(m, r, "iouscope_iowq_workers", "bound"), 0) << r.id();
        EXPECT_EQ(get(m, r, "iouscope_iowq_queues"), 1) << r.id();
        // Never more workers than were created, none exited: they are blocked, not idle.
        EXPECT_EQ(get(m, r, "iouscope_iowq_workers_created_total"),
                  get(m, r, "iouscope_iowq_workers", "unbound"))
            << r.id();
        EXPECT_EQ(get(m, r, "iouscope_iowq_workers_exited_total"), 0) << r.id();
        EXPECT_EQ(get(m, r, "iouscope_iowq_requests_in_flight"), timed ? 5 : -1) << r.id();
        // Each splice punted once, whatever the reason the kernel gives.
        double punts = 0;
        for (const char* why : {"forced", "other"})
            punts += find_value(m, "iouscope_ring_request_punts_total",
                                {{"ring", r.id()}, {"op", "splice"}, {"reason", why}})
                         .value_or(0);
        EXPECT_EQ(punts, 5) << r.id();
        if (timed) {
            EXPECT_EQ(find_value(m, "iouscope_ring_requests_in_flight", {{"ring", r.id()}}), 5)
                << r.id();
        }
    }
    EXPECT_EQ(get(m, c[0], "iouscope_iowq_max_workers", "unbound"), 2);
    // Closing the rings cancels the splices: the loads exit cleanly, and their series go.
    wide.signal(SIGTERM);
    capped.signal(SIGTERM);
    ASSERT_EQ(wide.wait(seconds(30)), std::optional<int>(0));
    ASSERT_EQ(capped.wait(seconds(30)), std::optional<int>(0));
    EXPECT_TRUE(eventually(seconds(5), [&] {
        m = d.scrape();
        return get(m, w[0], "iouscope_iowq_workers", "unbound") == -1 &&
               get(m, c[0], "iouscope_iowq_workers", "unbound") == -1;
    }));
}
