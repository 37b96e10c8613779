// The submit and reap loops of one iouscope-load ring (ring_worker.hpp). An SQE is counted once
// io_uring_submit has flushed it; the ring is done when every counted SQE has its CQE and the
// kernel's SQ head has moved by exactly that many plus the ring's stuck= reads. SQPOLL rings
// wait for SQ space rather than for a completion when the ring looks full. overflow= runs first:
// NOPs pushed through the CQ overflow list, reaped before the normal SQEs start.
#include "ring_worker.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "exit.hpp"
#include "pipe_ring.hpp"
#include "ring_setup.hpp"

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
        if (st_.spec.pipes > 0) {
            const PipeCounts n = run_pipe_ring(st_, ctl_);
            extra_sqes_ = n.sqes;
            extra_cqes_ = n.cqes;
        } else if (st_.spec.fanout > 0) {
            fanout_loop();
        } else if (overflow_cq() && prepare_buffers()) {
            submit_loop();
        }
        ctl_.submission_ended(st_.spec.count > 0);
        if (!failed()) {
            drain();
        }
        if (!failed()) {
            verify_kernel_consumed();
        }
        if (buf_ring_ != nullptr) {  // nothing selects from it any more: every read is reaped
            io_uring_unregister_buf_ring(&ring_, kBufGroup);
        }
        st_.sqes = extra_sqes_ + queued_;
        st_.cqes = extra_cqes_ + cqes_;
        st_.progress.store(st_.sqes, std::memory_order_relaxed);
        ctl_.ring_done();
    }

private:
    bool failed() const { return !st_.failure_call.empty(); }

    void fail(const char* call, int err, std::string detail = {}) {
        st_.failure_call = call;
        st_.failure_errno = err;
        st_.failure_detail = std::move(detail);
    }

    // overflow=K: cq_entries_for(depth) + K NOPs without reaping, in chunks of at most the SQ
    // size, each consumed by the kernel before the next is written. The first chunks fill the
    // CQ exactly, so the overflow starts with the next one: with the default CQ exactly K CQEs
    // take the overflow list, with cq= what the burst exceeds it by (overflow_expected). NOPs
    // without IOSQE_ASYNC complete while the kernel consumes them, so all are posted before the
    // first is reaped; then all are reaped, and rate= counts from there.
    bool overflow_cq() {
        if (st_.spec.overflow == 0) {
            return true;
        }
        const unsigned cq = ring_.cq.ring_entries;
        const std::uint64_t total = overflow_burst(st_.spec);
        const unsigned dropped = IO_URING_READ_ONCE(*ring_.cq.koverflow);
        if (io_uring_cq_ready(&ring_) != 0) {
            fail("overflow= check", 0, "the CQ was not empty before the overflow= NOPs");
            return false;
        }
        while (extra_sqes_ < total) {
            const std::uint64_t upto =
                extra_sqes_ < cq ? std::min<std::uint64_t>(cq, total) : total;
            const auto n = static_cast<unsigned>(
                std::min<std::uint64_t>(ring_.sq.ring_entries, upto - extra_sqes_));
            for (unsigned i = 0; i < n; ++i) {
                io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
                if (sqe == nullptr) {  // cannot happen: the kernel consumed every earlier chunk
                    fail("overflow= check", 0, "no free SQE for the overflow= NOPs");
                    return false;
                }
                io_uring_prep_nop(sqe);
                io_uring_sqe_set_data64(sqe, kOverflowUserData | (extra_sqes_ + i));
            }
            extra_sqes_ += n;
            if (const int ret = submit_all(ring_); ret < 0) {
                const bool refused = ret == -EBUSY || ret == -ETIMEDOUT;
                fail("submitting the overflow= NOPs", 0,
                     errno_text(-ret) +
                         (refused ? "; kernels such as 5.10 take no SQE while CQEs wait in "
                                    "the overflow list, so overflow= can be at most sq_entries (" +
                                        std::to_string(ring_.sq.ring_entries) + ") there"
                                  : ""));
                return false;
            }
        }
        if (!check_overflowed(cq, total, dropped) || !reap_overflowed(total)) {
            return false;
        }
        st_.overflowed = total > cq ? static_cast<unsigned>(total - cq) : 0;
        rate_origin_ = ctl_.schedule().active_at(Clock::now());
        return true;
    }

    // The kernel's own word that the CQ overflowed and kept every CQE: a full CQ, the
    // IORING_SQ_CQ_OVERFLOW flag, and no CQE dropped (the CQ's overflow counter). A burst the
    // CQ holds (cq=) must leave every CQE in the CQ and the flag clear.
    bool check_overflowed(unsigned cq, std::uint64_t total, unsigned dropped) {
        const auto give_up = Clock::now() + 1s;
        const bool over = total > cq;
        const auto fill = static_cast<unsigned>(std::min<std::uint64_t>(cq, total));
        while (io_uring_cq_ready(&ring_) < fill || (over && !io_uring_cq_has_overflow(&ring_))) {
            if (Clock::now() >= give_up) {
                fail("overflow= check", 0,
                     "after " + std::to_string(total) + " NOPs without reaping, the CQ holds " +
                         std::to_string(io_uring_cq_ready(&ring_)) + " of " + std::to_string(fill) +
                         " CQEs and the kernel has " +
                         (io_uring_cq_has_overflow(&ring_) ? "" : "not ") +
                         "flagged an overflow (IORING_SQ_CQ_OVERFLOW)");
                return false;
            }
            std::this_thread::sleep_for(100us);
        }
        if (!over && io_uring_cq_has_overflow(&ring_)) {
            fail("overflow= check", 0,
                 "the kernel flagged an overflow (IORING_SQ_CQ_OVERFLOW) of a CQ of " +
                     std::to_string(cq) + " entries after only " + std::to_string(total) + " NOPs");
            return false;
        }
        const unsigned now_dropped = IO_URING_READ_ONCE(*ring_.cq.koverflow);
        if (now_dropped != dropped) {
            fail("overflow= check", 0,
                 "the kernel dropped " + std::to_string(now_dropped - dropped) +
                     " CQEs (the CQ's overflow counter) instead of keeping them");
            return false;
        }
        return true;
    }

    // Every overflow= CQE: those in the CQ, then what io_uring_get_events moves from the
    // overflow list into the room made.
    bool reap_overflowed(std::uint64_t total) {
        auto give_up = Clock::now() + 1s;
        for (;;) {
            const std::uint64_t before = extra_cqes_;
            reap_ready();
            if (extra_cqes_ >= total) {
                return true;
            }
            if (extra_cqes_ != before) {
                give_up = Clock::now() + 1s;
            } else if (Clock::now() >= give_up) {
                fail("overflow= check", 0,
                     "only " + std::to_string(extra_cqes_) + " of " + std::to_string(total) +
                         " CQEs came back from the overflow list");
                return false;
            }
            const int ret = io_uring_get_events(&ring_);
            if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
                fail("io_uring_get_events", -ret);
                return false;
            }
        }
    }

    bool prepare_buffers() {
        if (ring_op(st_.spec) == Op::Nop) {
            return true;
        }
        const std::size_t slots = st_.spec.depth;
        buffers_.reset(static_cast<std::byte*>(std::aligned_alloc(kBlockSize, slots * kBlockSize)));
        if (!buffers_) {
            fail("aligned_alloc", ENOMEM);
            return false;
        }
        std::memset(buffers_.get(), 0, slots * kBlockSize);  // what op=write writes
        free_slots_.reserve(slots);
        for (std::size_t i = slots; i-- > 0;) {
            free_slots_.push_back(static_cast<unsigned>(i));
        }
        return st_.spec.bufs == 0 || prepare_buf_ring();
    }

    // bufs=N: a provided-buffer ring (group kBufGroup) of N 4 KiB buffers that every read
    // selects from, each given back as its CQE is reaped. The ring's size is N rounded up to a
    // power of two, as the kernel wants; its memory is page-aligned, as it wants too.
    bool prepare_buf_ring() {
        const unsigned n = st_.spec.bufs;
        buf_entries_ = std::bit_ceil(n);
        const std::size_t ring_bytes =
            std::max<std::size_t>(kBlockSize, buf_entries_ * sizeof(io_uring_buf));
        buf_ring_mem_.reset(static_cast<std::byte*>(std::aligned_alloc(kBlockSize, ring_bytes)));
        buf_pool_.reset(static_cast<std::byte*>(std::aligned_alloc(kBlockSize, n * kBlockSize)));
        if (!buf_ring_mem_ || !buf_pool_) {
            fail("aligned_alloc", ENOMEM);
            return false;
        }
        std::memset(buf_ring_mem_.get(), 0, ring_bytes);
        io_uring_buf_reg reg{};
        reg.ring_addr = reinterpret_cast<std::uint64_t>(buf_ring_mem_.get());
        reg.ring_entries = buf_entries_;
        reg.bgid = kBufGroup;
        if (const int ret = io_uring_register_buf_ring(&ring_, &reg, 0); ret < 0) {
            fail("io_uring_register_buf_ring", 0,
                 errno_text(-ret) +
                     (ret == -EINVAL ? "; provided-buffer rings need Linux 5.19" : ""));
            return false;
        }
        buf_ring_ = reinterpret_cast<io_uring_buf_ring*>(buf_ring_mem_.get());
        io_uring_buf_ring_init(buf_ring_);
        for (unsigned bid = 0; bid < n; ++bid) {
            add_buffer(bid, static_cast<int>(bid));
        }
        io_uring_buf_ring_advance(buf_ring_, static_cast<int>(n));
        return true;
    }

    // Buffer `bid` into the ring's slot `offset` past its tail, made visible by the next advance.
    void add_buffer(unsigned bid, int offset) {
        io_uring_buf_ring_add(buf_ring_, buf_pool_.get() + std::size_t{bid} * kBlockSize,
                              kBlockSize, static_cast<unsigned short>(bid),
                              io_uring_buf_ring_mask(buf_entries_), offset);
    }

    void give_back_buffer(unsigned bid) {
        add_buffer(bid, 0);
        io_uring_buf_ring_advance(buf_ring_, 1);
    }

    // fanout=N: every second, N splices of one byte from a pipe of the ring's own into
    // /dev/null. A splice cannot be armed for poll, so each blocks an io-wq worker until the
    // ring writes N bytes into the pipe 20 ms later; then all N are reaped. Between bursts the
    // workers wait for work. The splices count as sqes and cqes, outside count= and rate=.
    void fanout_loop() {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) {
            fail("pipe2 for the fanout= splices", errno);
            return;
        }
        const int sink = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (sink < 0) {
            fail("open /dev/null for the fanout= splices", errno);
        }
        const unsigned n = st_.spec.fanout;
        const std::string bytes(n, 'x');
        const Schedule& sched = ctl_.schedule();
        auto next = Clock::now();
        while (!failed() && !ctl_.stop_requested() && !sched.expired(Clock::now())) {
            for (unsigned i = 0; i < n; ++i) {
                io_uring_sqe* sqe = io_uring_get_sqe(&ring_);  // n <= depth: always one free
                io_uring_prep_splice(sqe, fds[0], -1, sink, -1, 1, 0);
                io_uring_sqe_set_data64(sqe, kFanoutUserData | i);
            }
            extra_sqes_ += n;
            if (const int ret = submit_all(ring_); ret < 0) {
                fail("submitting the fanout= splices", -ret);
                break;
            }
            std::this_thread::sleep_for(20ms);
            if (write(fds[1], bytes.data(), n) != static_cast<ssize_t>(n)) {
                fail("writing the fanout= pipe", errno);
                break;
            }
            const auto give_up = Clock::now() + 5s;
            while (extra_cqes_ < extra_sqes_ && !failed() && Clock::now() < give_up) {
                wait_completion();
            }
            if (extra_cqes_ < extra_sqes_ && !failed()) {
                fail("fanout= check", 0,
                     std::to_string(extra_sqes_ - extra_cqes_) + " of a burst's " +
                         std::to_string(n) + " splices did not complete in 5 s");
            }
            next += 1s;
            ctl_.sleep_until(sched.clip(next));
        }
        close(fds[0]);
        close(fds[1]);
        if (sink >= 0) {
            close(sink);
        }
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
                const std::uint64_t due = sqes_due(sched.active_at(now) - rate_origin_, spec.rate);
                if (due <= queued_) {
                    reap_ready();
                    const auto next = sched.when_active(rate_origin_ + due_at(queued_, spec.rate));
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
            st_.progress.store(extra_sqes_ + queued_, std::memory_order_relaxed);
            reap_ready();
        }
    }

    unsigned queue_sqes(unsigned n) {
        const Op op = ring_op(st_.spec);
        unsigned queued = 0;
        for (; queued < n; ++queued) {
            io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
            if (sqe == nullptr) {
                break;
            }
            if (op == Op::Nop) {
                io_uring_prep_nop(sqe);
                io_uring_sqe_set_data64(sqe, 0);
            } else {
                // The in-flight cap equals the number of slots, so one is always free here.
                const unsigned slot = free_slots_.back();
                free_slots_.pop_back();
                std::byte* buf = buffers_.get() + slot * kBlockSize;
                if (op == Op::Read) {
                    const std::uint64_t offset = (rng_() % wl_.blocks) * kBlockSize;
                    const bool select = st_.spec.bufs > 0;
                    io_uring_prep_read(sqe, wl_.fd, select ? nullptr : buf, kBlockSize, offset);
                    if (select) {
                        sqe->buf_group = kBufGroup;
                    }
                } else {  // each slot its own block of the scratch file
                    io_uring_prep_write(sqe, st_.spec.direct ? wl_.direct_fd : wl_.scratch_fd, buf,
                                        kBlockSize, std::uint64_t{slot} * kBlockSize);
                }
                io_uring_sqe_set_data64(sqe, slot);
            }
            io_uring_sqe_set_flags(sqe, (st_.spec.async ? IOSQE_ASYNC : 0U) |
                                            (st_.spec.bufs > 0 ? IOSQE_BUFFER_SELECT : 0U));
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
        if (cqe.user_data & (kOverflowUserData | kFanoutUserData)) {
            ++extra_cqes_;
            count_error(cqe);
            return;
        }
        if (cqe.user_data & kStuckUserData) {
            // Not counted and never waited for; report_failures() says that one ended early.
            if (st_.stuck_cqes++ == 0) {
                st_.first_stuck_res = cqe.res;
            }
            return;
        }
        ++cqes_;
        if (st_.spec.bufs > 0 && cqe.res == -ENOBUFS) {
            ++st_.enobufs;  // what bufs= is for, not a failure
        } else {
            count_error(cqe);
        }
        if (cqe.flags & IORING_CQE_F_BUFFER) {
            give_back_buffer(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
        }
        if (ring_op(st_.spec) != Op::Nop) {
            free_slots_.push_back(static_cast<unsigned>(cqe.user_data));
        }
    }

    void count_error(const io_uring_cqe& cqe) {
        if (cqe.res < 0) {
            if (st_.cqe_errors++ == 0) {
                st_.first_cqe_error = -cqe.res;
            }
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

    // A cross-check of the accounting against the kernel's own view: the SQ head, 0 when the
    // ring was made, is advanced by exactly the number of SQEs the kernel consumed: the stuck=
    // reads and blocked= splices, the overflow= NOPs and the normal SQEs. An SQPOLL thread can post
    // CQEs a moment before it publishes the new head, hence the short grace period.
    void verify_kernel_consumed() {
        const auto give_up = Clock::now() + 1s;
        const std::uint64_t parked = std::uint64_t{st_.spec.stuck} + st_.spec.blocked;
        const std::uint64_t expected = parked + extra_sqes_ + queued_;
        for (;;) {
            const unsigned head = io_uring_smp_load_acquire(ring_.sq.khead);
            if (head == static_cast<unsigned>(expected)) {
                return;
            }
            if (Clock::now() >= give_up) {
                fail("accounting check", 0,
                     "kernel SQ head advanced by " + std::to_string(head) + " but " +
                         std::to_string(extra_sqes_ + queued_) + " SQEs and " +
                         std::to_string(parked) +
                         " stuck= reads and blocked= splices were queued (mod 2^32)");
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
    // The overflow= NOPs, all reaped before the normal SQEs start, and where rate= then starts.
    std::uint64_t extra_sqes_ = 0;
    std::uint64_t extra_cqes_ = 0;
    nanoseconds rate_origin_{0};
    std::unique_ptr<std::byte, FreeDeleter> buffers_;
    std::vector<unsigned> free_slots_;
    // bufs=: the buffer ring shared with the kernel, and the buffers it hands out.
    std::unique_ptr<std::byte, FreeDeleter> buf_ring_mem_;
    std::unique_ptr<std::byte, FreeDeleter> buf_pool_;
    io_uring_buf_ring* buf_ring_ = nullptr;
    unsigned buf_entries_ = 0;
    std::mt19937_64 rng_;
};

}  // namespace

void run_ring_worker(RingState& st, RunControl& ctl, const Workload& wl) {
    RingWorker(st, ctl, wl).run();
}

}  // namespace iouscope::load
