// Live tier: what iouscope says about an SQ thread's time in the setups SQPOLL users run:
// waits that are not idle sleeps (parking, sqd->lock), wakeups from interrupts, and a thread
// pinned alone on an isolated nohz_full CPU. Each test drives its own ring through liburing, so
// the ground truth (parks, timeouts, the kernel's own switch counts) is exact.
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

using namespace live;
using namespace std::chrono;

namespace {

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
        const auto end = steady_clock::now() + span;
        while (steady_clock::now() < end) {
            submit_nop();
            reap();
            if (done && done()) return true;
            std::this_thread::sleep_for(milliseconds(50));
        }
        return false;
    }

    // The SQ thread's labels, once a walk has seen the ring.
    std::map<std::string, std::string> thread_labels(Daemon& d) {
        std::map<std::string, std::string> l;
        // Generous: a TCG guest with one CPU for everything but the SQ thread is slow to start.
        std::string seen;
        eventually(seconds(15), [&] {
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
                        d.process().drain(seconds(2)).c_str());
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
            std::this_thread::sleep_for(milliseconds(150));
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

bool pin_self(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0;
}

// The CPUs of a kernel cpulist ("1", "1-3,5"), empty for "(null)" or nothing.
std::vector<int> parse_cpulist(const std::string& text) {
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

}  // namespace

// Parking and lock waits are voluntary switch-outs too; counted as idle sleeps they were charged
// sq_thread_idle of spin each. Here the thread never idles (2 s idle, an SQE every millisecond),
// so every voluntary switch it makes is a block.
TEST_F(Sched, ParkingAndLockWaitsAreBlocksNotIdleSleeps) {
    auto d = start_daemon("100ms", {kFromBirth}, {"sched_switch"});
    if (!d) return;
    // SQ thread and submitter on one CPU: a parker there cannot spin on the mutex the SQ thread
    // holds, so parks make the SQ thread wait rather than race past it.
    ASSERT_TRUE(pin_self(0));
    open_sqpoll(2000, 0);
    auto l = thread_labels(*d);
    ASSERT_FALSE(l.empty()) << "no walk saw ring " << ring_id_;

    // A ring that joins the thread (IORING_SETUP_ATTACH_WQ) parks it to add itself, and parks
    // it again to leave when it closes: what a server that opens rings per connection does.
    // Registering buffers holds the ring's uring_lock for the pinning of 8 MB; an SQE waiting
    // meanwhile sends the SQ thread to wait for that lock (kernels up to 6.12 park by handing
    // sqd->lock over, which on one CPU is a preemption, not a wait).
    std::vector<char> buf(8 << 20);
    std::vector<iovec> iov(64);
    for (std::size_t i = 0; i < iov.size(); ++i)
        iov[i] = {buf.data() + i * (buf.size() / iov.size()), buf.size() / iov.size()};
    int parks = 0, registrations = 0;
    const auto end = steady_clock::now() + milliseconds(2500);
    for (int i = 0; steady_clock::now() < end; ++i) {
        submit_nop();
        reap();
        if (i % 10 == 5) {
            submit_nop();
            int err =
                io_uring_register_buffers(&ring_, iov.data(), static_cast<unsigned>(iov.size()));
            ASSERT_EQ(err, 0) << "io_uring_register_buffers: " << std::strerror(-err);
            ASSERT_EQ(io_uring_unregister_buffers(&ring_), 0);
            ++registrations;
        }
        if (i % 10 == 0) {
            io_uring_params p{};
            p.flags = IORING_SETUP_SQPOLL | IORING_SETUP_ATTACH_WQ;
            p.wq_fd = static_cast<unsigned>(ring_.ring_fd);
            io_uring guest{};
            int err = io_uring_queue_init_params(8, &guest, &p);
            ASSERT_EQ(err, 0) << "ATTACH_WQ: " << std::strerror(-err);
            io_uring_queue_exit(&guest);
            parks += 2;
        }
        std::this_thread::sleep_for(milliseconds(1));
    }
    // Quiet: the thread polls (2 s idle) and switches no more; two samples see the same counts.
    std::this_thread::sleep_for(milliseconds(500));
    auto m = d->scrape();
    const double sleeps = value(m, "iouscope_sqthread_sleeps_total", l);
    const double blocks = value(m, "iouscope_sqthread_blocks_total", l);
    const double blocked = value(m, "iouscope_sqthread_blocked_seconds_total", l);
    const double vcsw = value(m, "iouscope_sqthread_voluntary_switches_total", l);
    const double cpu = value(m, "iouscope_sqthread_cpu_seconds_total", l);
    const double spin = value(m, "iouscope_sqthread_spin_seconds_total", l);
    std::printf(
        "%d parks, %d buffer registrations: %.0f blocks (%.3f s), %.0f idle sleeps, "
        "%.0f voluntary switches; CPU %.3f s, spin charged %.3f s (as sleeps, the blocks "
        "would have been charged %.3f s)\n",
        parks, registrations, blocks, blocked, sleeps, vcsw, cpu, spin,
        std::min(cpu, (sleeps + blocks) * 2.002));
    // No gap between SQEs came near the 2 s idle. One sleep at the loop's idle site happens now
    // and then on 6.18 all the same (seen with a kernel stack in io_sq_thread's schedule()), so
    // one is allowed: counted as blocks, there were hundreds.
    EXPECT_LE(sleeps, 1);
    // Whether the thread waits at all is the kernel's affair: 6.13+ parks it with wait_event
    // (hundreds of blocks here); up to 6.12 a park on one CPU hands sqd->lock over by preemption,
    // and the guests' kernels blocked it 0 to 3 times.
    if (blocks < 10)
        std::printf("note: this kernel made the SQ thread wait only %.0f times\n", blocks);
    // The kernel's own count: every voluntary switch is one or the other, none twice.
    EXPECT_EQ(sleeps + blocks, vcsw);
    if (blocks > 0) {
        EXPECT_GT(blocked, 0);
    }
    // Blocks charge no idle spin. With the kernel's work time (6.18+) the estimate is not used.
    if (value(m, "iouscope_sqthread_work_time_source",
              {{"sq_thread", l.at("sq_thread")}, {"source", "estimate"}}) == 1) {
        EXPECT_LT(spin, sleeps * 2.004 + 0.05);
    }
}

// A timeout's hrtimer fires in hardirq context and wakes the sleeping SQ thread to complete it.
// The task it interrupted (often the idle task) was named as the waker before.
TEST_F(Sched, TimerInterruptWakeupsAreNamedAsInterrupts) {
    auto d = start_daemon("100ms", {kFromBirth}, {"sched_waking"});
    if (!d) return;
    open_sqpoll(10);
    auto l = thread_labels(*d);
    ASSERT_FALSE(l.empty()) << "no walk saw ring " << ring_id_;

    // 100 ms timeouts against 10 ms of idle: the thread is asleep each time one fires. A thread
    // per CPU spins in user mode meanwhile, so the timer interrupt finds user code running, as
    // on a busy host: x86-64 then runs it on the interrupted task's stack (core_fixes.bpf.h).
    constexpr int kTimeouts = 20;
    std::atomic<bool> stop_spinning{false};
    std::vector<std::thread> spinners;
    for (unsigned c = 0; c < std::thread::hardware_concurrency(); ++c)
        spinners.emplace_back([&] {
            while (!stop_spinning.load(std::memory_order_relaxed)) {
            }
        });
    struct Join {
        std::atomic<bool>& stop;
        std::vector<std::thread>& threads;
        ~Join() {
            stop = true;
            for (auto& t : threads) t.join();
        }
    };
    // Ground truth for the task wakeups: the submitter wakes the thread only when liburing's
    // io_uring_submit finds IORING_SQ_NEED_WAKEUP set. Read before and after the submit, so a
    // flag set in between is counted too: this is an upper bound.
    auto needs_wakeup = [&] {
        return (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_NEED_WAKEUP) != 0;
    };
    int submits_to_sleeper = 0;
    {
        Join join{stop_spinning, spinners};  // also when an assertion returns early
        for (int i = 0; i < kTimeouts; ++i) {
            __kernel_timespec ts{0, 100'000'000};
            io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
            ASSERT_NE(sqe, nullptr);
            io_uring_prep_timeout(sqe, &ts, 0, 0);
            const bool before = needs_wakeup();
            ASSERT_GE(io_uring_submit(&ring_), 0);
            if (before || needs_wakeup()) ++submits_to_sleeper;
            io_uring_cqe* cqe = nullptr;
            ASSERT_EQ(io_uring_wait_cqe(&ring_, &cqe), 0);
            EXPECT_EQ(cqe->res, -ETIME);
            io_uring_cqe_seen(&ring_, cqe);
        }
    }
    auto wakeups_in = [&](const std::vector<Series>& m, const std::string& context) {
        return wakeups_by(m, l.at("sq_thread"), "waker_context", context);
    };
    // The thread is asleep for good now.
    const auto m = settled_scrape(*d, seconds(5), [&](const std::vector<Series>& s) {
        return std::vector<double>{value(s, "iouscope_sqthread_wakeups_total", l),
                                   wakeups_in(s, "irq"), wakeups_in(s, "task"),
                                   value(s, "iouscope_sqthread_sleeps_total", l)};
    });
    const double total = value(m, "iouscope_sqthread_wakeups_total", l);
    const double irq = wakeups_in(m, "irq"), task = wakeups_in(m, "task");
    // Sleeps that ended with no wakeup traced (the thread sleeps again at the end, hence - 1).
    const double untraced = value(m, "iouscope_sqthread_sleeps_total", l) - 1 - total;
    std::printf(
        "%d timeouts, %d submits found the thread asleep: %.0f wakeups, %.0f from interrupts, "
        "%.0f from tasks; %.0f sleeps ended with no wakeup traced\n",
        kTimeouts, submits_to_sleeper, total, irq, task, untraced);
    // Every wakeup the scheduler traced is named, once.
    EXPECT_EQ(irq + task, total);
    // Named by the task they interrupted (a spinner, of this process), the timer's wakeups would
    // push the task count past what the submitter did.
    EXPECT_LE(task, submits_to_sleeper);
    // Most timeouts find the thread asleep: 10 ms idle against 100 ms. Not all, on a loaded host:
    // a thread preempted on its way to sleep needs no wakeup, and the 6.18 host, under CPU
    // contention, put the sleeping thread back on a CPU when its timer fired with no wakeup
    // traced at all (seen also by bpftrace's sched_waking). Exact equality flaked that way.
    EXPECT_GE(irq, kTimeouts / 2);
    EXPECT_LE(irq, kTimeouts);
    expect_interrupts_have_no_waker_pid(m);
}

// The same from a device: reads on an NVMe namespace without poll queues complete in its
// interrupt handler, which hands the completion to the SQ thread and wakes it when it sleeps.
// Before, the wake was charged to whatever task the interrupt had interrupted. How many reads
// end while the thread sleeps depends on the kernel and on how fast the emulated device is: in
// the tests/vm guests, three runs in one boot gave 16, 10 and 7 of 20 on bullseye (another
// boot's second run gave 0) and 20, 17, 15 on bookworm; the read times printed show the device
// warming up. So the test asks for no number of interrupt wakes, only that every wake this
// process did not make be named an interrupt's; the timer test above asks for interrupt wakes on
// every kernel.
TEST_F(Sched, NvmeCompletionWakeupsAreNamedAsInterrupts) {
    std::string dev;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/sys/block", ec)) {
        const auto n = e.path().filename().string();
        const std::string io_poll = read_first_line(e.path() / "queue/io_poll");
        if (n.rfind("nvme", 0) == 0 && n.find('c') == std::string::npos && io_poll == "0") {
            dev = "/dev/" + n;
            break;
        }
    }
    if (dev.empty())
        GTEST_SKIP() << "no NVMe namespace completing by interrupt (the tests/vm guests' nvme1n1)";
    const int fd = ::open(dev.c_str(), O_RDONLY | O_DIRECT);
    ASSERT_GE(fd, 0) << dev << ": " << std::strerror(errno);
    auto d = start_daemon("100ms", {kFromBirth}, {"sched_waking"});
    if (!d) return;
    open_sqpoll(1);
    auto l = thread_labels(*d);
    ASSERT_FALSE(l.empty()) << "no walk saw ring " << ring_id_;

    // Reads of 32 MiB, one at a time, 30 ms apart. The block layer splits each into requests
    // the device works through for longer than the thread's 1 ms of polling, and only the last
    // of them completes the read: the thread is asleep by then, and the interrupt wakes it.
    constexpr int kReads = 20;
    constexpr unsigned kSize = 32u << 20;
    void* buf = std::aligned_alloc(4096, kSize);
    std::vector<double> read_ms;
    for (int i = 0; i < kReads; ++i) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        ASSERT_NE(sqe, nullptr);
        io_uring_prep_read(sqe, fd, buf, kSize, static_cast<__u64>(i % 16) * kSize);
        const auto t0 = steady_clock::now();
        ASSERT_EQ(io_uring_submit(&ring_), 1);
        io_uring_cqe* cqe = nullptr;
        ASSERT_EQ(io_uring_wait_cqe(&ring_, &cqe), 0);
        read_ms.push_back(
            std::chrono::duration<double, std::milli>(steady_clock::now() - t0).count());
        EXPECT_EQ(cqe->res, static_cast<int>(kSize));
        io_uring_cqe_seen(&ring_, cqe);
        std::this_thread::sleep_for(milliseconds(30));
    }
    std::sort(read_ms.begin(), read_ms.end());
    std::printf("read time: min %.1f ms, median %.1f, max %.1f\n", read_ms.front(),
                read_ms[read_ms.size() / 2], read_ms.back());
    std::free(buf);
    ::close(fd);
    auto wakeups_in = [&](const std::vector<Series>& m, const std::string& context) {
        return wakeups_by(m, l.at("sq_thread"), "waker_context", context);
    };
    // The last read's wake may fall inside one sample's reads.
    const auto m = settled_scrape(*d, seconds(5), [&](const std::vector<Series>& s) {
        const double total = value(s, "iouscope_sqthread_wakeups_total", l);
        return total > 0 ? std::vector<double>{total, wakeups_in(s, "irq"), wakeups_in(s, "task")}
                         : std::vector<double>{};
    });
    const double total = value(m, "iouscope_sqthread_wakeups_total", l);
    const double irq = wakeups_in(m, "irq"), task = wakeups_in(m, "task");
    const double own = wakeups_by(m, l.at("sq_thread"), "waker_pid", std::to_string(::getpid()));
    std::printf(
        "%d reads of 32 MiB on %s: %.0f wakeups, %.0f from interrupts, %.0f from tasks (%.0f "
        "by this process)\n",
        kReads, dev.c_str(), total, irq, task, own);
    // Every wakeup is named. This process wakes the thread once per read at most (its
    // io_uring_enter) and nothing else here touches the ring, so every other wake is a
    // completion's interrupt: named by the task it interrupted, as before, it would not be.
    EXPECT_EQ(irq + task, total);
    EXPECT_EQ(task, own) << "a wake by another task, or an interrupt's named as one";
    EXPECT_LE(irq, kReads);
    EXPECT_LE(own, kReads + 1);
    expect_interrupts_have_no_waker_pid(m);
}

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
