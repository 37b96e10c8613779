#pragma once
// The fixture of the Sched live tests (sched_test.cpp: blocks and interrupt wakeups;
// sched_gate_test.cpp: the scheduler gate): a daemon with the probes a test needs, and a ring of
// the test's own driven through liburing, so that the ground truth is exact.
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

#include "tests/live/harness.hpp"

namespace live {

class Sched : public ::testing::Test {
protected:
    void SetUp() override {
        if (auto why = live_tier_unavailable()) GTEST_SKIP() << *why;
        sched_getaffinity(0, sizeof affinity_, &affinity_);
    }
    void TearDown() override {
        if (ring_open_) io_uring_queue_exit(&ring_);
        sched_setaffinity(0, sizeof affinity_, &affinity_);  // tests that pin leave no trace
    }

    // The default gate (lazy where no CPU is nohz_full) leaves a new thread's first sleeps to
    // its counts, without wakers or blocks told apart. Tests of what the programs see of a
    // thread from its birth ask for the gate that follows it from there.
    static inline const std::string kFromBirth = "--probes.sched-gate=on";

    // A daemon sampling every `interval` with the sched tracepoints `probes` attached, or null
    // (the caller returns): it did not start, a failure, or this kernel cannot attach one of
    // them, a skip.
    std::unique_ptr<Daemon> start_daemon(const std::string& interval, std::vector<std::string> args,
                                         std::initializer_list<std::string> probes) {
        args.insert(args.begin(), "--sample.interval=" + interval);
        auto d = std::make_unique<Daemon>(std::move(args));
        EXPECT_TRUE(d->ready()) << d->startup_log();
        if (!d->ready()) return nullptr;
        for (const auto& p : probes) {
            if (probe_attached(*d, p)) continue;
            std::string why = p + " is not attachable on this kernel";
            if (probes.size() > 1) why = "the sched tracepoints are not attachable on this kernel";
            [&] { GTEST_SKIP() << why; }();  // GTEST_SKIP returns: only from a void function
            return nullptr;
        }
        return d;
    }

    // An SQPOLL ring with the given idle time, its SQ thread on `cpu` when >= 0.
    void open_sqpoll(unsigned idle_ms, int cpu = -1) {
        io_uring_params p{};
        p.flags = IORING_SETUP_SQPOLL;
        p.sq_thread_idle = idle_ms;
        if (cpu >= 0) {
            p.flags |= IORING_SETUP_SQ_AFF;
            p.sq_thread_cpu = static_cast<unsigned>(cpu);
        }
        int err = io_uring_queue_init_params(64, &ring_, &p);
        ASSERT_EQ(err, 0) << "io_uring_queue_init_params: " << std::strerror(-err);
        ring_open_ = true;
        ring_id_ = std::to_string(getpid()) + ":" + std::to_string(ring_.ring_fd);
    }

    void submit_nop() {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        ASSERT_NE(sqe, nullptr);
        io_uring_prep_nop(sqe);
        ASSERT_GE(io_uring_submit(&ring_), 0);
    }

    void reap() {
        io_uring_cqe* cqe = nullptr;
        while (io_uring_peek_cqe(&ring_, &cqe) == 0) io_uring_cqe_seen(&ring_, cqe);
    }

    // Keeps the SQ thread polling: an SQE every 50 ms, its CQE reaped, for `span` or until
    // `done` says so. Whether `done` did.
    bool poll_for(std::chrono::milliseconds span, const std::function<bool()>& done) {
        const auto end = std::chrono::steady_clock::now() + span;
        while (std::chrono::steady_clock::now() < end) {
            submit_nop();
            reap();
            if (done && done()) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return false;
    }

    // The SQ thread's labels, once a walk has seen the ring.
    std::map<std::string, std::string> thread_labels(Daemon& d) {
        std::map<std::string, std::string> l;
        // Generous: a TCG guest with one CPU for everything but the SQ thread is slow to start.
        std::string seen;
        eventually(std::chrono::seconds(15), [&] {
            seen.clear();
            for (const auto& s : d.scrape()) {
                if (s.name == "iouscope_samples_total")
                    seen += " samples=" + std::to_string(s.value);
                if (s.name != "iouscope_ring_sqes_total") continue;
                seen += " ring " + s.labels.at("ring") + " sq_thread=" + s.labels.at("sq_thread");
                if (s.labels.at("ring") == ring_id_ && !s.labels.at("sq_thread").empty()) {
                    l = {{"sq_thread", s.labels.at("sq_thread")}};
                    return true;
                }
            }
            return false;
        });
        // What the last scrape showed, for a test that fails on an empty answer.
        if (l.empty())
            std::printf("last scrape:%s\ndaemon's log:\n%s\n", seen.c_str(),
                        d.process().drain(std::chrono::seconds(2)).c_str());
        return l;
    }

    static double value(const std::vector<Series>& m, const std::string& name,
                        const std::map<std::string, std::string>& l) {
        return find_value(m, name, l).value_or(-1);
    }

    // The SQ thread's wakeups whose `label` (waker_context, waker_pid) is `want`.
    static double wakeups_by(const std::vector<Series>& m, const std::string& sq_thread,
                             const std::string& label, const std::string& want) {
        double n = 0;
        for (const auto& s : m)
            if (s.name == "iouscope_sqthread_wakeups_by_waker_total" &&
                s.labels.at("sq_thread") == sq_thread && s.labels.at(label) == want)
                n += s.value;
        return n;
    }

    // Scrapes after each sample (the daemon samples every 100 ms) until two scrapes in a row
    // give the same `reading`, or `limit` passes; returns the last scrape. A wake that lands
    // inside one sample's map reads is seen whole by the next. An empty reading (nothing to
    // compare yet) never settles.
    static std::vector<Series> settled_scrape(
        Daemon& d, std::chrono::milliseconds limit,
        const std::function<std::vector<double>(const std::vector<Series>&)>& reading) {
        std::vector<Series> m;
        std::vector<double> last;
        eventually(limit, [&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(150));
            m = d.scrape();
            auto now = reading(m);
            const bool settled = !now.empty() && now == last;
            last = std::move(now);
            return settled;
        });
        return m;
    }

    static void expect_interrupts_have_no_waker_pid(const std::vector<Series>& m) {
        for (const auto& s : m)
            if (s.name == "iouscope_sqthread_wakeups_by_waker_total" &&
                s.labels.at("waker_context") != "task") {
                EXPECT_EQ(s.labels.at("waker_pid"), "0") << "an interrupt has no waker process";
            }
    }

    io_uring ring_{};
    cpu_set_t affinity_{};
    bool ring_open_ = false;
    std::string ring_id_;
};

inline bool pin_self(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0;
}

// The CPUs of a kernel cpulist ("1", "1-3,5"), empty for "(null)" or nothing.
inline std::vector<int> parse_cpulist(const std::string& text) {
    std::vector<int> out;
    std::stringstream in(text);
    std::string part;
    while (std::getline(in, part, ',')) {
        int lo = 0, hi = 0;
        if (std::sscanf(part.c_str(), "%d-%d", &lo, &hi) == 2) {
            for (int c = lo; c <= hi; ++c) out.push_back(c);
        } else if (std::sscanf(part.c_str(), "%d", &lo) == 1) {
            out.push_back(lo);
        }
    }
    return out;
}

}  // namespace live
