// The submit and reap loops of one iouscope-load ring (ring_worker.hpp). An SQE is counted once
// io_uring_submit has flushed it; the ring is done when every counted SQE has its CQE and the
// kernel's SQ head has moved by exactly that many. SQPOLL rings wait for SQ space rather than
// for a completion when the ring looks full.
#include "ring_worker.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace iouscope::load {

namespace {

using namespace std::chrono_literals;

struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
};

class RingWorker {
public:
    RingWorker(RingState& st, RunControl& ctl, const Workload& wl)
        : st_(st), ctl_(ctl), wl_(wl), ring_(st.ring), rng_(0x5eed0000u + st.index) {}

    void run() {
        ctl_.wait_for_start();
        if (prepare_buffers()) {
            head_at_start_ = io_uring_smp_load_acquire(ring_.sq.khead);
            submit_loop();
        }
        ctl_.submission_ended(st_.spec.count > 0);
        if (!failed()) {
            drain();
        }
        if (!failed()) {
            verify_kernel_consumed();
        }
        st_.sqes = queued_;
        st_.cqes = cqes_;
        st_.progress.store(queued_, std::memory_order_relaxed);
        ctl_.ring_done();
    }

private:
    bool failed() const { return !st_.failure_call.empty(); }

    void fail(const char* call, int err, std::string detail = {}) {
        st_.failure_call = call;
        st_.failure_errno = err;
        st_.failure_detail = std::move(detail);
    }

    bool prepare_buffers() {
        if (wl_.op != Op::Read) {
            return true;
        }
        const std::size_t slots = st_.spec.depth;
        buffers_.reset(static_cast<std::byte*>(std::aligned_alloc(kBlockSize, slots * kBlockSize)));
        if (!buffers_) {
            fail("aligned_alloc", ENOMEM);
            return false;
        }
        free_slots_.reserve(slots);
        for (std::size_t i = slots; i-- > 0;) {
            free_slots_.push_back(static_cast<unsigned>(i));
        }
        return true;
    }

    void submit_loop() {
        const RingSpec& spec = st_.spec;
        const Schedule& sched = ctl_.schedule();
        const std::uint64_t target =
            spec.count > 0 ? spec.count : std::numeric_limits<std::uint64_t>::max();
        const std::uint64_t depth = spec.depth;

        while (!failed() && !ctl_.stop_requested() && queued_ < target) {
            const auto now = Clock::now();
            if (sched.expired(now)) {
                break;
            }
            if (const auto resume = sched.pause_end(now)) {
                reap_ready();
                ctl_.sleep_until(sched.clip(*resume));
                continue;
            }
            const std::uint64_t in_flight = queued_ - cqes_;
            if (in_flight >= depth) {
                wait_completion();
                continue;
            }
            std::uint64_t n =
                std::min<std::uint64_t>({spec.batch, depth - in_flight, target - queued_});
            if (spec.rate > 0) {
                const std::uint64_t due = sqes_due(sched.active_at(now), spec.rate);
                if (due <= queued_) {
                    reap_ready();
                    const auto next = sched.when_active(due_at(queued_, spec.rate));
                    ctl_.sleep_until(sched.clip(next));
                    continue;
                }
                n = std::min(n, due - queued_);
            }
            if (queue_sqes(static_cast<unsigned>(n)) == 0) {
                wait_for_sq_space();
                continue;
            }
            enter(0);
            st_.progress.store(queued_, std::memory_order_relaxed);
            reap_ready();
        }
    }

    unsigned queue_sqes(unsigned n) {
        unsigned queued = 0;
        for (; queued < n; ++queued) {
            io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
            if (sqe == nullptr) {
                break;
            }
            if (wl_.op == Op::Nop) {
                io_uring_prep_nop(sqe);
                io_uring_sqe_set_data64(sqe, 0);
            } else {
                // The in-flight cap equals the number of slots, so one is always free here.
                const unsigned slot = free_slots_.back();
                free_slots_.pop_back();
                const std::uint64_t offset = (rng_() % wl_.blocks) * kBlockSize;
                io_uring_prep_read(sqe, wl_.fd, buffers_.get() + slot * kBlockSize, kBlockSize,
                                   offset);
                io_uring_sqe_set_data64(sqe, slot);
            }
        }
        queued_ += queued;
        return queued;
    }

    // io_uring_submit flushes every SQE written so far into the SQ ring before it does anything
    // else, even when the io_uring_enter that follows fails. So after this call all of queued_
    // is visible to the kernel: a non-SQPOLL ring may leave some unconsumed after a short or
    // failed enter, and the next enter (including drain's) picks them up again. That is why
    // queued_ rather than the sum of io_uring_submit's return values is the count: for SQPOLL
    // the return value is the number of entries still waiting in the ring (tail - head), which
    // can include SQEs already returned by an earlier call.
    void enter(unsigned wait_nr) {
        for (;;) {
            const int ret =
                wait_nr > 0 ? io_uring_submit_and_wait(&ring_, wait_nr) : io_uring_submit(&ring_);
            if (ret >= 0) {
                return;
            }
            if (ret == -EINTR) {
                continue;
            }
            if (ret == -EAGAIN || ret == -EBUSY) {
                // Back-pressure (no request memory, or CQ overflow pending): the SQEs stay in
                // the SQ ring, so reap what is there and let a later enter retry.
                reap_ready();
                std::this_thread::sleep_for(1ms);
                return;
            }
            fail(wait_nr > 0 ? "io_uring_submit_and_wait" : "io_uring_submit", -ret);
            return;
        }
    }

    void reap_ready() {
        unsigned head = 0;
        unsigned seen = 0;
        io_uring_cqe* cqe = nullptr;
        io_uring_for_each_cqe(&ring_, head, cqe) {
            account(*cqe);
            ++seen;
        }
        io_uring_cq_advance(&ring_, seen);
    }

    void account(const io_uring_cqe& cqe) {
        ++cqes_;
        if (cqe.res < 0) {
            if (st_.cqe_errors++ == 0) {
                st_.first_cqe_error = -cqe.res;
            }
        }
        if (wl_.op == Op::Read) {
            free_slots_.push_back(static_cast<unsigned>(cqe.user_data));
        }
    }

    // The in-flight cap keeps the SQ ring from filling up with SQEs the kernel has not consumed,
    // but an SQ thread can post CQEs a moment before it publishes the new SQ head, so the ring
    // can look full with nothing left to complete. Waiting for a CQE then could block forever;
    // IORING_ENTER_SQ_WAIT waits for exactly the thing that is missing. Without SQPOLL a full
    // ring means a short io_uring_enter left SQEs behind, and submitting again consumes them.
    void wait_for_sq_space() {
        if (!uses_sqpoll(st_.spec.mode)) {
            wait_completion();
            return;
        }
        const int ret = io_uring_sqring_wait(&ring_);
        if (ret < 0 && ret != -EINTR) {
            fail("io_uring_sqring_wait", -ret);
        }
    }

    void wait_completion() {
        enter(1);
        reap_ready();
    }

    void drain() {
        reap_ready();
        while (cqes_ < queued_ && !failed()) {
            wait_completion();
        }
    }

    // A cross-check of the accounting against the kernel's own view: the SQ head is advanced
    // by exactly the number of SQEs the kernel consumed. An SQPOLL thread can post CQEs a
    // moment before it publishes the new head, hence the short grace period.
    void verify_kernel_consumed() {
        const auto give_up = Clock::now() + 1s;
        for (;;) {
            const unsigned head = io_uring_smp_load_acquire(ring_.sq.khead);
            const unsigned consumed = head - head_at_start_;
            if (consumed == static_cast<unsigned>(queued_)) {
                return;
            }
            if (Clock::now() >= give_up) {
                fail("accounting check", 0,
                     "kernel SQ head advanced by " + std::to_string(consumed) + " but " +
                         std::to_string(queued_) + " SQEs were queued (mod 2^32)");
                return;
            }
            std::this_thread::sleep_for(100us);
        }
    }

    RingState& st_;
    RunControl& ctl_;
    const Workload& wl_;
    io_uring& ring_;
    std::uint64_t queued_ = 0;  // SQEs written to the SQ ring; flushed by every enter()
    std::uint64_t cqes_ = 0;
    unsigned head_at_start_ = 0;
    std::unique_ptr<std::byte, FreeDeleter> buffers_;
    std::vector<unsigned> free_slots_;
    std::mt19937_64 rng_;
};

}  // namespace

void run_ring_worker(RingState& st, RunControl& ctl, const Workload& wl) {
    RingWorker(st, ctl, wl).run();
}

}  // namespace iouscope::load
