// pipes=N (load/pipe_ring.hpp): poll-driven reads, completed by a writer thread's bytes.
#include "pipe_ring.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "exit.hpp"

namespace iouscope::load {

namespace {

using namespace std::chrono_literals;

class PipeRing {
public:
    PipeRing(RingState& st, RunControl& ctl) : st_(st), ctl_(ctl), ring_(st.ring) {}

    ~PipeRing() {
        for (const int fd : fds_) close(fd);
    }

    PipeCounts run() {
        if (!open_pipes() || !enable()) return counts_;
        for (unsigned i = 0; i < st_.spec.pipes; ++i) queue_read(i);
        std::thread writer([this] { write_loop(); });
        if (st_.spec.busy > 0) {
            busy_loop();
        } else {
            wait_loop();
        }
        stop_writer_.store(true, std::memory_order_release);
        writer.join();
        if (const int err = writer_errno_.load(std::memory_order_acquire); err != 0)
            fail("writing a pipes= pipe", err);
        return counts_;
    }

private:
    bool failed() const { return !st_.failure_call.empty(); }

    void fail(const char* call, int err, std::string detail = {}) {
        if (failed()) return;
        st_.failure_call = call;
        st_.failure_errno = err;
        st_.failure_detail = std::move(detail);
    }

    bool open_pipes() {
        for (unsigned i = 0; i < st_.spec.pipes; ++i) {
            int p[2];
            if (pipe2(p, O_CLOEXEC) != 0) {
                fail("pipe2 for the pipes= reads", errno);
                return false;
            }
            fds_.push_back(p[0]);
            fds_.push_back(p[1]);
        }
        return true;
    }

    // defer: the ring was made disabled (IORING_SETUP_R_DISABLED) so that this thread, the one
    // that submits, becomes its single issuer when it enables it.
    bool enable() {
        if (!st_.spec.defer) return true;
        // By the system call: bookworm's liburing (2.3) declares io_uring_enable_rings but its
        // library does not export it.
        if (syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr,
                    0) < 0) {
            fail("io_uring_register(IORING_REGISTER_ENABLE_RINGS)", errno);
            return false;
        }
        return true;
    }

    void queue_read(unsigned i) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);  // pipes <= depth: always one free
        io_uring_prep_read(sqe, fds_[2 * i], &sink_, 1, 0);
        io_uring_sqe_set_data64(sqe, i);
        ++counts_.sqes;
        ++outstanding_;
    }

    // rate= bytes a second, one pipe after another; then a byte for every pipe, so that every
    // read in flight, or submitted before the ring sees done_, completes. Its own thread: it
    // touches nothing of the ring's, and leaves an error in writer_errno_.
    void write_loop() {
        // Named apart from the ring's thread, so that tools (and the doctor test) tell them apart.
        pthread_setname_np(pthread_self(), "pipes-writer");
        if (st_.spec.busy > 0) pin_to(1);
        const Schedule& sched = ctl_.schedule();
        const auto start = Clock::now();
        const std::uint64_t rate = st_.spec.rate, pipes = st_.spec.pipes;
        const char byte = 'x';
        for (std::uint64_t k = 0; !ctl_.stop_requested(); ++k) {
            const auto at = start + std::chrono::nanoseconds(k * 1'000'000'000ULL / rate);
            if (sched.expired(at) || stop_writer_.load(std::memory_order_acquire)) break;
            std::this_thread::sleep_until(at);
            if (write(fds_[2 * (k % pipes) + 1], &byte, 1) != 1) {
                writer_errno_.store(errno, std::memory_order_release);
                break;
            }
        }
        done_.store(true, std::memory_order_release);
        for (std::uint64_t i = 0; i < pipes; ++i)
            if (write(fds_[2 * i + 1], &byte, 1) != 1)
                writer_errno_.store(errno, std::memory_order_release);
    }

    // Submits what is queued and waits for batch= completions (fewer once done_), reaps them,
    // and reads each pipe again until the writer is done; then until every read is reaped.
    void wait_loop() {
        while (outstanding_ > 0 && !failed()) {
            const bool done = done_.load(std::memory_order_acquire);
            const unsigned want = done ? 1 : std::min<unsigned>(st_.spec.batch, outstanding_);
            // No timeout: on kernels before 5.11 liburing would add a timeout SQE of its own.
            const int ret = io_uring_submit_and_wait(&ring_, want);
            if (ret < 0 && ret != -EINTR) fail("io_uring_submit_and_wait", -ret);
            reap();
        }
    }

    // busy=P: P% of every millisecond spent computing in user space, the rest asleep; between
    // the two the thread reaps what the kernel posted and submits the reads again. Completions
    // come by task work, which the kernel runs when the thread is back in the kernel: sent an
    // IPI to interrupt it while it computes, or (coop) at its next system call, which the
    // kernel asks for with IORING_SQ_TASKRUN.
    void busy_loop() {
        pin_to(0);
        const auto compute = std::chrono::microseconds(10 * st_.spec.busy);
        const auto rest = std::chrono::microseconds(1000) - compute;
        while (outstanding_ > 0 && !failed()) {
            for (const auto until = Clock::now() + compute; Clock::now() < until;) {
            }
            if (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_TASKRUN) {
                if (const int ret = io_uring_get_events(&ring_); ret < 0 && ret != -EINTR)
                    fail("io_uring_get_events", -ret);
            }
            reap();
            if (io_uring_sq_ready(&ring_) > 0) {
                if (const int ret = io_uring_submit(&ring_); ret < 0 && ret != -EINTR)
                    fail("io_uring_submit", -ret);
            }
            if (rest.count() > 0) std::this_thread::sleep_for(rest);
        }
    }

    // busy=: the ring's thread on the first CPU it may use, the writer on the second, so that
    // each completion comes from another CPU than the one the thread computes on, as a device
    // interrupt's or another thread's does. Nothing where the process has one CPU.
    static void pin_to(unsigned which) {
        cpu_set_t allowed;
        if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) return;
        for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; ++cpu) {
            if (!CPU_ISSET(cpu, &allowed) || seen++ != static_cast<int>(which)) continue;
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            return;
        }
    }

    void reap() {
        unsigned head = 0, seen = 0;
        io_uring_cqe* cqe = nullptr;
        std::vector<unsigned> again;
        io_uring_for_each_cqe(&ring_, head, cqe) {
            ++seen;
            --outstanding_;
            ++counts_.cqes;
            if (cqe->res != 1 && st_.cqe_errors++ == 0)
                st_.first_cqe_error = cqe->res < 0 ? -cqe->res : EIO;
            if (!done_.load(std::memory_order_acquire))
                again.push_back(static_cast<unsigned>(cqe->user_data));
        }
        io_uring_cq_advance(&ring_, seen);
        for (const unsigned i : again) queue_read(i);
        st_.progress.store(counts_.sqes, std::memory_order_relaxed);
    }

    RingState& st_;
    RunControl& ctl_;
    io_uring& ring_;
    std::vector<int> fds_;                  // read end, write end of pipe 0, then of pipe 1, ...
    char sink_ = 0;                         // every read's byte: nobody looks at it
    std::atomic<bool> done_{false};         // the writer has written its last rate= byte
    std::atomic<bool> stop_writer_{false};  // the ring has stopped: so does the writer
    std::atomic<int> writer_errno_{0};
    unsigned outstanding_ = 0;
    PipeCounts counts_;
};

}  // namespace

PipeCounts run_pipe_ring(RingState& st, RunControl& ctl) {
    return PipeRing(st, ctl).run();
}

}  // namespace iouscope::load
