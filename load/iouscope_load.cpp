// iouscope-load: io_uring load generator whose printed per-ring SQE counts are the ground truth
// the daemon's metrics are tested against. See help.cpp for the user-facing contract.

#include <fcntl.h>
#include <liburing.h>
#include <linux/fs.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "command_line.hpp"
#include "iouscope/seeds_uapi.h"

namespace {

namespace ul = iouscope::load;
using ul::kProg;
using Clock = std::chrono::steady_clock;
using std::chrono::nanoseconds;
using namespace std::chrono_literals;

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr std::size_t kBlockSize = 4096;

[[noreturn]] void die_usage(const std::string& msg) {
    std::fprintf(stderr, "%s: %s\nTry '%s --help' for more information.\n", kProg, msg.c_str(),
                 kProg);
    std::exit(kExitUsage);
}

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "%s: %s\n", kProg, msg.c_str());
    std::exit(kExitFailure);
}

std::string errno_text(int err) {
    // strerror() may share a static buffer between threads; only the main thread formats errors.
    return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

// ---- Shared run schedule ------------------------------------------------------------------------

// One schedule for all rings so that pause windows line up and every ring sees the same deadline.
class Schedule {
public:
    Schedule(Clock::time_point start, std::optional<nanoseconds> duration,
             std::optional<ul::PauseSpec> pause)
        : start_(start), pause_(pause) {
        if (duration) {
            deadline_ = start + *duration;
        }
    }

    Clock::time_point start() const { return start_; }

    bool expired(Clock::time_point now) const { return deadline_ && now >= *deadline_; }

    Clock::time_point clip(Clock::time_point t) const {
        return deadline_ ? std::min(t, *deadline_) : t;
    }

    // When `now` lies in a pause window, the moment that window ends.
    std::optional<Clock::time_point> pause_end(Clock::time_point now) const {
        if (!pause_) {
            return std::nullopt;
        }
        const nanoseconds cycle = pause_->every + pause_->length;
        const nanoseconds elapsed = since_start(now);
        const auto cycles = elapsed / cycle;
        if (elapsed - cycles * cycle < pause_->every) {
            return std::nullopt;
        }
        return start_ + (cycles + 1) * cycle;
    }

    // Submitting time elapsed at `now`, i.e. wall time minus the pauses, which is what rate=
    // is measured against.
    nanoseconds active_at(Clock::time_point now) const {
        const nanoseconds elapsed = since_start(now);
        if (!pause_) {
            return elapsed;
        }
        const nanoseconds cycle = pause_->every + pause_->length;
        const auto cycles = elapsed / cycle;
        return cycles * pause_->every + std::min(elapsed - cycles * cycle, pause_->every);
    }

    // Inverse of active_at(). An exact multiple of the pause period maps to the start of the
    // next submitting window, not to the end of the previous one, because nothing may be
    // submitted during the pause in between.
    Clock::time_point when_active(nanoseconds active) const {
        if (!pause_) {
            return start_ + active;
        }
        const nanoseconds cycle = pause_->every + pause_->length;
        const auto cycles = active / pause_->every;
        return start_ + cycles * cycle + (active - cycles * pause_->every);
    }

private:
    nanoseconds since_start(Clock::time_point now) const {
        return std::max(nanoseconds{0}, std::chrono::duration_cast<nanoseconds>(now - start_));
    }

    Clock::time_point start_;
    std::optional<Clock::time_point> deadline_;
    std::optional<ul::PauseSpec> pause_;
};

// SQE k (counting from 0) is due at active time k/rate, so the first one goes out immediately
// and a slow rate never waits a whole period before starting.
std::uint64_t sqes_due(nanoseconds active, std::uint64_t rate) {
    const auto due = static_cast<unsigned __int128>(std::max<std::int64_t>(active.count(), 0)) *
                     rate / 1'000'000'000u;
    return static_cast<std::uint64_t>(
               std::min<unsigned __int128>(due, std::numeric_limits<std::uint64_t>::max() - 1)) +
           1;
}

nanoseconds due_at(std::uint64_t k, std::uint64_t rate) {
    const unsigned __int128 ns =
        (static_cast<unsigned __int128>(k) * 1'000'000'000u + rate - 1) / rate;
    // Capped far beyond any realistic run so time_point arithmetic cannot overflow.
    constexpr unsigned __int128 kCap = 1'000'000'000ull * 3600 * 24 * 365 * 100;
    return nanoseconds{static_cast<std::int64_t>(std::min(ns, kCap))};
}

class RunControl {
public:
    RunControl(std::optional<nanoseconds> duration, std::optional<ul::PauseSpec> pause,
               std::size_t counted_rings, bool stop_when_counted_done)
        // The placeholder schedule is replaced by start() before any worker may read it.
        : duration_(duration),
          pause_(pause),
          schedule_(Clock::now(), duration, pause),
          counted_left_(counted_rings),
          stop_when_counted_done_(stop_when_counted_done) {}

    // Only valid once wait_for_start() has returned.
    const Schedule& schedule() const { return schedule_; }

    // Workers are held back until all threads exist: with hundreds of rings, threads that start
    // early would otherwise starve the main thread of CPU while it is still spawning the rest,
    // and the shared schedule would start before most rings could submit anything. This is an
    // atomic wait rather than the condition variable because notify_all on a condition variable
    // hands the mutex from one woken thread to the next, which serialises a thousand wake-ups
    // behind threads that are already busy submitting.
    void wait_for_start() {
        while (!started_.load(std::memory_order_acquire)) {
            started_.wait(false, std::memory_order_acquire);
        }
    }

    void start() {
        schedule_ = Schedule(Clock::now(), duration_, pause_);
        started_.store(true, std::memory_order_release);
        started_.notify_all();
    }

    bool stop_requested() const { return stop_.load(std::memory_order_acquire); }

    void request_stop() {
        {
            std::lock_guard lock(mu_);
            stop_.store(true, std::memory_order_release);
        }
        cv_.notify_all();
    }

    // A condition variable rather than sleep_until so that a signal or the last counted ring
    // finishing ends every rate-limit or pause sleep at once.
    void sleep_until(Clock::time_point t) {
        std::unique_lock lock(mu_);
        cv_.wait_until(lock, t, [this] { return stop_.load(std::memory_order_acquire); });
    }

    // Called when a ring stops submitting, before it drains, so that rings without a count stop
    // as soon as the last counted ring is done rather than after its drain.
    void submission_ended(bool counted) {
        if (counted && counted_left_.fetch_sub(1) == 1 && stop_when_counted_done_) {
            request_stop();
        }
    }

    void ring_done() { done_.fetch_add(1, std::memory_order_acq_rel); }
    std::size_t rings_done() const { return done_.load(std::memory_order_acquire); }

private:
    const std::optional<nanoseconds> duration_;
    const std::optional<ul::PauseSpec> pause_;
    Schedule schedule_;
    std::atomic<bool> started_{false};
    std::atomic<bool> stop_{false};
    std::mutex mu_;
    std::condition_variable cv_;
    std::atomic<std::size_t> counted_left_;
    const bool stop_when_counted_done_;
    std::atomic<std::size_t> done_{0};
};

// ---- Rings --------------------------------------------------------------------------------------

struct Workload {
    ul::Op op = ul::Op::Nop;
    int fd = -1;
    std::uint64_t blocks = 0;  // number of 4 KiB blocks in the file
};

struct RingState {
    std::size_t index = 0;
    ul::RingSpec spec;
    io_uring ring{};
    bool open = false;
    int sq_thread = -1;

    // Read by the main thread for progress while the worker runs.
    std::atomic<std::uint64_t> progress{0};

    // Written by the worker, read by the main thread only after join().
    std::uint64_t sqes = 0;
    std::uint64_t cqes = 0;
    std::uint64_t cqe_errors = 0;
    int first_cqe_error = 0;
    std::string failure_call;  // non-empty after a fatal io_uring error
    int failure_errno = 0;
    std::string failure_detail;
};

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
        if (wl_.op != ul::Op::Read) {
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
        const ul::RingSpec& spec = st_.spec;
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
            if (wl_.op == ul::Op::Nop) {
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
        if (wl_.op == ul::Op::Read) {
            free_slots_.push_back(static_cast<unsigned>(cqe.user_data));
        }
    }

    // The in-flight cap keeps the SQ ring from filling up with SQEs the kernel has not consumed,
    // but an SQ thread can post CQEs a moment before it publishes the new SQ head, so the ring
    // can look full with nothing left to complete. Waiting for a CQE then could block forever;
    // IORING_ENTER_SQ_WAIT waits for exactly the thing that is missing. Without SQPOLL a full
    // ring means a short io_uring_enter left SQEs behind, and submitting again consumes them.
    void wait_for_sq_space() {
        if (!ul::uses_sqpoll(st_.spec.mode)) {
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

// ---- Setup helpers ------------------------------------------------------------------------------

std::string describe(const ul::RingSpec& spec) {
    std::string out =
        "mode=" + std::string(ul::mode_name(spec.mode)) + " depth=" + std::to_string(spec.depth);
    if (spec.idle_ns) {
        out += " idle_ns=" + std::to_string(*spec.idle_ns);
    } else if (ul::uses_sqpoll(spec.mode)) {
        out += " idle=" + std::to_string(spec.idle_ms);
    }
    if (spec.percpu) {
        out += " percpu";
    }
    if (spec.stats) {
        out += " stats";
    }
    if (spec.share) {
        out += " share=" + std::to_string(*spec.share);
    }
    if (spec.cpu) {
        out += " cpu=" + std::to_string(*spec.cpu);
    }
    return out;
}

std::string limit_text(rlim_t value) {
    return value == RLIM_INFINITY ? "unlimited" : std::to_string(value);
}

void ensure_fd_limit(std::size_t rings) {
    // Each ring is one fd; the margin covers stdio, --file and whatever the C++ runtime opens.
    const rlim_t need = static_cast<rlim_t>(rings) + 64;
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
        die("getrlimit(RLIMIT_NOFILE): " + errno_text(errno));
    }
    if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= need) {
        return;
    }
    rlimit want = lim;
    want.rlim_cur = need;
    if (want.rlim_max != RLIM_INFINITY && want.rlim_max < need) {
        want.rlim_max = need;
    }
    if (setrlimit(RLIMIT_NOFILE, &want) != 0) {
        const int err = errno;
        die("cannot raise RLIMIT_NOFILE to " + std::to_string(need) + " for " +
            std::to_string(rings) + " rings (soft " + limit_text(lim.rlim_cur) + ", hard " +
            limit_text(lim.rlim_max) + "): " + errno_text(err) +
            "; raise it with ulimit -n or run with CAP_SYS_RESOURCE");
    }
}

// Kernels before 5.12 charge ring memory to RLIMIT_MEMLOCK; newer ones use the memory cgroup.
// Only called after an ENOMEM so that well-configured systems never see a limit change.
bool try_raise_memlock(std::string& why) {
    rlimit lim{};
    if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0) {
        why = "getrlimit(RLIMIT_MEMLOCK): " + errno_text(errno);
        return false;
    }
    if (lim.rlim_cur == RLIM_INFINITY) {
        why = "RLIMIT_MEMLOCK is already unlimited";
        return false;
    }
    const rlimit want{RLIM_INFINITY, RLIM_INFINITY};
    if (setrlimit(RLIMIT_MEMLOCK, &want) == 0) {
        return true;
    }
    if (lim.rlim_max != lim.rlim_cur) {
        const rlimit soft{lim.rlim_max, lim.rlim_max};
        if (setrlimit(RLIMIT_MEMLOCK, &soft) == 0) {
            return true;
        }
    }
    why = "could not raise RLIMIT_MEMLOCK (soft " + limit_text(lim.rlim_cur) + ", hard " +
          limit_text(lim.rlim_max) + "): " + errno_text(errno);
    return false;
}

std::string completion_hint(int err, const ul::RingSpec& spec, ul::Op op) {
    if (err == EOPNOTSUPP && ul::uses_iopoll(spec.mode)) {
        return op == ul::Op::Read ? "; the device does not support polled I/O (see "
                                    "/sys/block/<dev>/queue/io_poll and the driver's poll queues)"
                                  : "; this kernel does not support NOPs on IOPOLL rings";
    }
    if (err == EINVAL && op == ul::Op::Read) {
        return "; the file or device may reject 4 KiB-aligned O_DIRECT reads";
    }
    return {};
}

std::string setup_hint(int err, const ul::RingSpec& spec) {
    switch (err) {
        case EPERM:
            return "; io_uring may be restricted (see /proc/sys/kernel/io_uring_disabled and "
                   "io_uring_group) or SQPOLL may need privileges on this kernel";
        case EMFILE:
        case ENFILE:
            return "; out of file descriptors";
        case EINVAL:
            if (spec.cpu) {
                return "; is CPU " + std::to_string(*spec.cpu) + " online?";
            }
            return "; this kernel may not support the requested flags";
        case ENOSYS:
            return "; this kernel has no io_uring";
        default:
            return {};
    }
}

std::uint32_t seeds_flags(const ul::RingSpec& spec) {
    return (spec.idle_ns ? IOU_SEEDS_SETUP_IDLE_NS : 0U) |
           (spec.percpu ? IOU_SEEDS_SETUP_SQPOLL_PERCPU : 0U) |
           (spec.stats ? IOU_SEEDS_SETUP_SQTHREAD_STATS : 0U);
}

// After an EINVAL: does this kernel know the seeds' flags the ring asked for? A ring with only
// SQPOLL and those flags tells, so that a missing patch is named instead of "invalid argument".
// PERCPU is asked without SQ_AFF: the patched kernel then makes a thread of the ring's own
// (it shares only with both), so a bad cpu= is not mistaken for a missing patch.
std::string seeds_hint(const ul::RingSpec& spec) {
    struct Flag {
        std::uint32_t bit;
        const char* what;
    };
    constexpr Flag kFlags[] = {
        {IOU_SEEDS_SETUP_IDLE_NS, "idle_ns= (IORING_SETUP_IDLE_NS, seeds patch 002)"},
        {IOU_SEEDS_SETUP_SQPOLL_PERCPU, "percpu (IORING_SETUP_SQPOLL_PERCPU, seeds patch 000)"},
        {IOU_SEEDS_SETUP_SQTHREAD_STATS, "stats (IORING_SETUP_SQTHREAD_STATS, seeds patch 004)"},
    };
    std::string missing;
    for (const Flag& f : kFlags) {
        if (!(seeds_flags(spec) & f.bit)) {
            continue;
        }
        io_uring probe{};
        io_uring_params params{};
        params.flags = IORING_SETUP_SQPOLL | f.bit;
        const int ret = io_uring_queue_init_params(1, &probe, &params);
        if (ret == 0) {
            io_uring_queue_exit(&probe);
        } else if (ret == -EINVAL) {
            missing += missing.empty() ? "" : ", ";
            missing += f.what;
        }
    }
    return missing.empty() ? std::string{}
                           : "; this kernel does not have " + missing +
                                 ": only the seeds kernel does (tests/vm/run --kernel seeds)";
}

int setup_ring(RingState& st, const std::vector<std::unique_ptr<RingState>>& rings) {
    const ul::RingSpec& spec = st.spec;
    io_uring_params params{};
    if (ul::uses_sqpoll(spec.mode)) {
        params.flags |= IORING_SETUP_SQPOLL;
        params.sq_thread_idle = spec.idle_ns ? *spec.idle_ns : spec.idle_ms;
    }
    params.flags |= seeds_flags(spec);
    if (ul::uses_iopoll(spec.mode)) {
        params.flags |= IORING_SETUP_IOPOLL;
    }
    if (spec.cpu) {
        params.flags |= IORING_SETUP_SQ_AFF;
        params.sq_thread_cpu = *spec.cpu;
    }
    if (spec.share) {
        params.flags |= IORING_SETUP_ATTACH_WQ;
        params.wq_fd = static_cast<std::uint32_t>(rings[*spec.share]->ring.ring_fd);
    }
    return io_uring_queue_init_params(spec.depth, &st.ring, &params);
}

int read_fdinfo_sq_thread(int ring_fd) {
    std::ifstream in("/proc/self/fdinfo/" + std::to_string(ring_fd));
    std::string line;
    constexpr std::string_view kKey = "SqThread:";
    while (std::getline(in, line)) {
        if (line.starts_with(kKey)) {
            try {
                return std::stoi(line.substr(kKey.size()));
            } catch (const std::exception&) {
                return -1;
            }
        }
    }
    return -1;
}

// Right after io_uring_setup the kernel reports the creating task's pid as SqThread until the
// new SQ thread has run and stored its own, so keep reading until the value is a different,
// live thread of this process.
int sq_thread_tid(const RingState& st) {
    if (!ul::uses_sqpoll(st.spec.mode)) {
        return -1;
    }
    const int creator = static_cast<int>(getpid());
    const auto give_up = Clock::now() + 2s;
    int tid = -1;
    for (;;) {
        tid = read_fdinfo_sq_thread(st.ring.ring_fd);
        if (tid > 0 && tid != creator) {
            struct stat sb {};
            const std::string task = "/proc/self/task/" + std::to_string(tid);
            if (stat(task.c_str(), &sb) == 0) {
                return tid;
            }
            // A per-CPU shared thread can be another process's; fdinfo shows that process's
            // pid until its thread has started, so only the thread's own comm settles it.
            if (st.spec.percpu) {
                std::ifstream comm("/proc/" + std::to_string(tid) + "/comm");
                std::string name;
                if (std::getline(comm, name) && name.starts_with("iou-sqp-")) {
                    return tid;
                }
            }
        }
        if (Clock::now() >= give_up) {
            return -1;
        }
        std::this_thread::sleep_for(1ms);
    }
}

Workload open_workload(const ul::LoadConfig& cfg) {
    Workload wl;
    wl.op = cfg.op;
    if (cfg.op != ul::Op::Read) {
        return wl;
    }
    const int fd = open(cfg.file.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        die_usage(
            "--file \"" + cfg.file + "\": cannot open with O_RDONLY|O_DIRECT: " + errno_text(err) +
            (err == EINVAL ? "; the filesystem may not support O_DIRECT (tmpfs does not)" : ""));
    }
    struct stat sb {};
    if (fstat(fd, &sb) != 0) {
        die_usage("--file \"" + cfg.file + "\": fstat: " + errno_text(errno));
    }
    std::uint64_t size = 0;
    if (S_ISREG(sb.st_mode)) {
        size = static_cast<std::uint64_t>(sb.st_size);
    } else if (S_ISBLK(sb.st_mode)) {
        if (ioctl(fd, BLKGETSIZE64, &size) != 0) {
            die_usage("--file \"" + cfg.file + "\": BLKGETSIZE64: " + errno_text(errno));
        }
    } else {
        die_usage("--file \"" + cfg.file + "\" is neither a regular file nor a block device");
    }
    if (size < kBlockSize) {
        die_usage("--file \"" + cfg.file + "\" is " + std::to_string(size) +
                  " bytes; --op read needs at least 4096");
    }
    wl.fd = fd;
    wl.blocks = size / kBlockSize;
    return wl;
}

// ---- Report -------------------------------------------------------------------------------------

void emit(const std::string& line) {
    std::fputs(line.c_str(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
}

std::string ring_line(const RingState& st, bool json, bool setup, std::uint64_t sqes,
                      std::uint64_t cqes) {
    const std::string pid = std::to_string(getpid());
    const std::string fd = std::to_string(st.ring.ring_fd);
    const std::string mode(ul::mode_name(st.spec.mode));
    if (json) {
        return std::string("{\"phase\":\"") + (setup ? "setup" : "final") +
               "\",\"index\":" + std::to_string(st.index) + ",\"pid\":" + pid + ",\"fd\":" + fd +
               ",\"mode\":\"" + mode + "\",\"sq_thread\":" + std::to_string(st.sq_thread) +
               ",\"sqes\":" + std::to_string(sqes) + ",\"cqes\":" + std::to_string(cqes) + "}";
    }
    return std::string(setup ? "setup" : "ring") + " index=" + std::to_string(st.index) +
           " pid=" + pid + " fd=" + fd + " mode=" + mode +
           " sq_thread=" + std::to_string(st.sq_thread) + " sqes=" + std::to_string(sqes) +
           " cqes=" + std::to_string(cqes);
}

class Progress {
public:
    explicit Progress(Clock::time_point start)
        : enabled_(isatty(STDERR_FILENO) == 1),
          start_(start),
          next_(start + 2s),
          last_time_(start) {}

    void tick(const std::vector<std::unique_ptr<RingState>>& rings) {
        const auto now = Clock::now();
        if (!enabled_ || now < next_) {
            return;
        }
        std::uint64_t total = 0;
        for (const auto& r : rings) {
            total += r->progress.load(std::memory_order_relaxed);
        }
        const double dt = std::chrono::duration<double>(now - last_time_).count();
        const double rate = dt > 0 ? static_cast<double>(total - last_total_) / dt : 0.0;
        const double elapsed = std::chrono::duration<double>(now - start_).count();
        std::fprintf(stderr, "\r%s: %.0fs sqes=%llu rate=%.0f/s\x1b[K", kProg, elapsed,
                     static_cast<unsigned long long>(total), rate);
        std::fflush(stderr);
        shown_ = true;
        last_total_ = total;
        last_time_ = now;
        while (next_ <= now) {
            next_ += 1s;
        }
    }

    void clear() {
        if (shown_) {
            std::fputs("\r\x1b[K", stderr);
            std::fflush(stderr);
            shown_ = false;
        }
    }

private:
    bool enabled_;
    Clock::time_point start_;
    Clock::time_point next_;
    Clock::time_point last_time_;
    std::uint64_t last_total_ = 0;
    bool shown_ = false;
};

// Waits up to `timeout` for SIGINT/SIGTERM; true if one arrived.
bool wait_signal(const sigset_t& set, nanoseconds timeout) {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
    for (;;) {
        const int sig = sigtimedwait(&set, nullptr, &ts);
        if (sig > 0) {
            return true;
        }
        if (errno == EINTR) {
            continue;
        }
        return false;
    }
}

// The command line into a configuration, or the help page or a usage error and the exit.
ul::LoadConfig configure(int argc, char** argv) {
    const ul::CommandLine line = ul::parse_command_line(argc, argv);
    if (std::holds_alternative<ul::HelpRequest>(line)) {
        std::fputs(ul::help_text(), stdout);
        std::exit(kExitOk);
    }
    if (const auto* err = std::get_if<ul::ParseError>(&line)) {
        die_usage(err->message);
    }
    auto cfg = ul::build_config(std::get<ul::RawOptions>(line));
    if (const auto* err = std::get_if<ul::ParseError>(&cfg)) {
        die_usage(err->message);
    }
    return std::get<ul::LoadConfig>(std::move(cfg));
}

// A signal during one cycle of --cycles ends the whole run after that cycle's report.
bool g_signalled = false;

int run(const ul::LoadConfig& cfg, const sigset_t& signals) {
    if (const auto err = ul::check_cpus(cfg, sysconf(_SC_NPROCESSORS_CONF))) {
        die_usage(*err);
    }
    const Workload workload = open_workload(cfg);
    ensure_fd_limit(cfg.rings.size());

    std::vector<std::unique_ptr<RingState>> rings;
    rings.reserve(cfg.rings.size());
    for (std::size_t i = 0; i < cfg.rings.size(); ++i) {
        auto st = std::make_unique<RingState>();
        st->index = i;
        st->spec = cfg.rings[i];
        int ret = setup_ring(*st, rings);
        std::string memlock_note;
        if (ret == -ENOMEM && try_raise_memlock(memlock_note)) {
            ret = setup_ring(*st, rings);
        }
        if (ret < 0) {
            std::string msg = "ring " + std::to_string(i) + " (" + describe(st->spec) +
                              "): io_uring_queue_init_params failed: " + errno_text(-ret);
            const std::string seeds = ret == -EINVAL ? seeds_hint(st->spec) : std::string{};
            msg += seeds.empty() ? setup_hint(-ret, st->spec) : seeds;
            if (ret == -ENOMEM) {
                msg += "; locked memory or the memory cgroup limit may be exhausted";
                if (!memlock_note.empty()) {
                    msg += " (" + memlock_note + ")";
                }
            }
            die(msg);
        }
        st->open = true;
        rings.push_back(std::move(st));
    }
    for (auto& st : rings) {
        st->sq_thread = sq_thread_tid(*st);
    }

    for (const auto& st : rings) {
        emit(ring_line(*st, cfg.json, true, 0, 0));
    }
    emit(cfg.json ? "{\"started\":true}" : "started");

    const std::size_t counted = static_cast<std::size_t>(std::count_if(
        cfg.rings.begin(), cfg.rings.end(), [](const ul::RingSpec& r) { return r.count > 0; }));
    RunControl ctl(cfg.duration, cfg.pause, counted, !cfg.duration);

    std::vector<std::thread> threads;
    threads.reserve(rings.size());
    std::string spawn_error;
    for (auto& st : rings) {
        try {
            threads.emplace_back(
                [&ctl, &workload, state = st.get()] { RingWorker(*state, ctl, workload).run(); });
        } catch (const std::system_error& e) {
            spawn_error =
                "cannot start thread for ring " + std::to_string(st->index) + ": " + e.what();
            ctl.request_stop();
            break;
        }
    }

    ctl.start();
    Progress progress(ctl.schedule().start());
    bool signalled = false;
    while (ctl.rings_done() < threads.size()) {
        if (wait_signal(signals, 20ms)) {
            if (signalled) {
                progress.clear();
                std::fprintf(stderr,
                             "%s: second signal, exiting without waiting for in-flight "
                             "completions\n",
                             kProg);
                std::_Exit(kExitFailure);
            }
            signalled = true;
            g_signalled = true;
            ctl.request_stop();
        }
        progress.tick(rings);
    }
    for (auto& t : threads) {
        t.join();
    }
    progress.clear();

    if (!spawn_error.empty()) {
        die(spawn_error);
    }

    int status = kExitOk;
    std::uint64_t total = 0;
    for (auto& st : rings) {
        // Re-read in case the setup-time read lost the race with a slow SQ thread start.
        if (st->sq_thread < 0 && ul::uses_sqpoll(st->spec.mode)) {
            st->sq_thread = sq_thread_tid(*st);
        }
        emit(ring_line(*st, cfg.json, false, st->sqes, st->cqes));
        total += st->sqes;
    }
    emit(cfg.json
             ? "{\"done\":true,\"rings\":" + std::to_string(rings.size()) +
                   ",\"sqes\":" + std::to_string(total) + "}"
             : "done rings=" + std::to_string(rings.size()) + " sqes=" + std::to_string(total));

    for (const auto& st : rings) {
        if (!st->failure_call.empty()) {
            std::string msg = "ring " + std::to_string(st->index) + ": " + st->failure_call;
            msg += st->failure_detail.empty() ? " failed: " + errno_text(st->failure_errno)
                                              : ": " + st->failure_detail;
            std::fprintf(stderr, "%s: %s\n", kProg, msg.c_str());
            status = kExitFailure;
        }
        if (st->cqe_errors > 0) {
            std::fprintf(
                stderr, "%s: ring %zu (%s): %llu of %llu completions failed, first: %s%s\n", kProg,
                st->index, describe(st->spec).c_str(),
                static_cast<unsigned long long>(st->cqe_errors),
                static_cast<unsigned long long>(st->cqes), errno_text(st->first_cqe_error).c_str(),
                completion_hint(st->first_cqe_error, st->spec, cfg.op).c_str());
            status = kExitFailure;
        }
    }

    if (!signalled && (cfg.hold.forever || cfg.hold.duration > nanoseconds{0})) {
        const auto until = Clock::now() + cfg.hold.duration;
        for (;;) {
            const auto now = Clock::now();
            if (!cfg.hold.forever && now >= until) {
                break;
            }
            const nanoseconds slice =
                cfg.hold.forever ? nanoseconds{1s} : std::min<nanoseconds>(1s, until - now);
            if (wait_signal(signals, slice)) {
                break;
            }
        }
    }

    for (auto it = rings.rbegin(); it != rings.rend(); ++it) {
        if ((*it)->open) {
            io_uring_queue_exit(&(*it)->ring);
        }
    }
    if (workload.fd >= 0) {
        close(workload.fd);
    }
    return status;
}

}  // namespace

int main(int argc, char** argv) {
    // Blocked before any thread exists so every thread inherits the mask and the main thread is
    // the only one that ever sees SIGINT/SIGTERM (via sigtimedwait); workers blocked in
    // io_uring_enter are then never interrupted.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    const ul::LoadConfig config = configure(argc, argv);
    int status = kExitOk;
    for (std::uint64_t k = 0; k < config.cycles; ++k) {
        if (config.cycles > 1) {
            emit(config.json ? "{\"cycle\":" + std::to_string(k) + "}"
                             : "cycle " + std::to_string(k));
        }
        if (run(config, signals) != kExitOk) {
            status = kExitFailure;
        }
        if (g_signalled || (k + 1 < config.cycles && wait_signal(signals, config.gap))) {
            break;
        }
    }
    return status;
}
