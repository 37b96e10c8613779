// Live tier: what iouscope says about an SQ thread's time in the setups SQPOLL users run: waits
// that are not idle sleeps (parking, sqd->lock) and wakeups from interrupts (the gate and the
// nohz_full CPU are in sched_gate_test.cpp). Each test drives its own ring through liburing, so
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

#include "tests/live/sched_fixture.hpp"

using namespace live;
using namespace std::chrono;

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
