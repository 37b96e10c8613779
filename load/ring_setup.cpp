// Setting up an iouscope-load run (ring_setup.hpp): limits, the read workload's file,
// io_uring_setup with SQPOLL, IOPOLL, SQ_AFF, ATTACH_WQ and the seeds kernel's flags, with the
// hints that turn a bare errno into a cause, and the stuck= reads every ring starts with.
#include "ring_setup.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "exit.hpp"
#include "iouscope/seeds_uapi.h"

namespace iouscope::load {

namespace {

std::string limit_text(rlim_t value) {
    return value == RLIM_INFINITY ? "unlimited" : std::to_string(value);
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

std::string setup_hint(int err, const RingSpec& spec) {
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

std::uint32_t seeds_flags(const RingSpec& spec) {
    return (spec.idle_ns ? IOU_SEEDS_SETUP_IDLE_NS : 0U) |
           (spec.percpu ? IOU_SEEDS_SETUP_SQPOLL_PERCPU : 0U) |
           (spec.stats ? IOU_SEEDS_SETUP_SQTHREAD_STATS : 0U);
}

// After an EINVAL: does this kernel know the seeds' flags the ring asked for? A ring with only
// SQPOLL and those flags tells, so that a missing patch is named instead of "invalid argument".
// PERCPU is asked without SQ_AFF: the patched kernel then makes a thread of the ring's own
// (it shares only with both), so a bad cpu= is not mistaken for a missing patch.
std::string seeds_hint(const RingSpec& spec) {
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
    const RingSpec& spec = st.spec;
    io_uring_params params{};
    if (uses_sqpoll(spec.mode)) {
        params.flags |= IORING_SETUP_SQPOLL;
        params.sq_thread_idle = spec.idle_ns ? *spec.idle_ns : spec.idle_ms;
    }
    params.flags |= seeds_flags(spec);
    if (uses_iopoll(spec.mode)) {
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
    if (spec.cq > 0) {
        params.flags |= IORING_SETUP_CQSIZE;
        params.cq_entries = spec.cq;
    }
    if (spec.defer) {  // disabled until its worker enables it, which makes that the issuer
        params.flags |=
            IORING_SETUP_R_DISABLED | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    }
    if (spec.coop) {
        params.flags |= IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    }
    return io_uring_queue_init_params(spec.depth, &st.ring, &params);
}

// The message for a ring io_uring_setup refused with -ret.
std::string setup_failure(const RingState& st, int ret, const std::string& memlock_note) {
    std::string msg = "ring " + std::to_string(st.index) + " (" + describe(st.spec) +
                      "): io_uring_queue_init_params failed: " + errno_text(-ret);
    const std::string seeds = ret == -EINVAL ? seeds_hint(st.spec) : std::string{};
    msg += seeds.empty() ? setup_hint(-ret, st.spec) : seeds;
    if (ret == -ENOMEM) {
        msg += "; locked memory or the memory cgroup limit may be exhausted";
        if (!memlock_note.empty()) {
            msg += " (" + memlock_note + ")";
        }
    }
    return msg;
}

// The read end of the pipe every stuck= read waits on: one per process, never written to and
// never closed. Closing the write end would complete the reads with end of file, and a closed
// ring cancels its requests only after close() has returned, so the pipe outlives every ring.
int stuck_pipe() {
    static int read_end = -1;
    if (read_end < 0) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) {
            die("pipe2 for the stuck= reads: " + errno_text(errno));
        }
        read_end = fds[0];
    }
    return read_end;
}

[[noreturn]] void die_ring(const RingState& st, const std::string& what) {
    die("ring " + std::to_string(st.index) + " (" + describe(st.spec) + "): " + what);
}

// max_workers=N: both accounts' limit for every io-wq that serves the ring, set before its
// first SQE. The kernel applies it to the io-wq of the thread that registers it and of every
// thread that submits to the ring afterwards (each thread has its own io-wq).
void limit_workers(RingState& st) {
    if (st.spec.max_workers == 0) return;
    unsigned limits[2] = {st.spec.max_workers, st.spec.max_workers};
    const int ret = io_uring_register_iowq_max_workers(&st.ring, limits);
    if (ret < 0)
        die_ring(
            st, "io_uring_register_iowq_max_workers for max_workers=: " + errno_text(-ret) +
                    (ret == -EINVAL ? " (IORING_REGISTER_IOWQ_MAX_WORKERS needs Linux 5.15)" : ""));
}

// The file the blocked= splices write to: /dev/null, one per process, open until it exits.
int null_sink() {
    static int fd = -1;
    if (fd < 0 && (fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) {
        die("open /dev/null for the blocked= splices: " + errno_text(errno));
    }
    return fd;
}

// Right after setup: spec.stuck reads of one byte from the pipe, then spec.blocked splices of
// one byte from it into /dev/null, in chunks of at most the SQ size, each consumed by the kernel
// before the next. The reads are blocking reads (no O_NONBLOCK) that the kernel parks on the
// pipe, or in an io-wq worker, until the ring is closed. A splice cannot be armed for poll, so
// each one blocks an io-wq worker of the unbound account. An SQPOLL ring of a
// kernel before 5.11 (no IORING_FEAT_SQPOLL_NONFIXED) reads only registered files, so there the
// pipe is registered as the ring's file 0 (blocked= is for plain rings only).
void park_stuck_requests(RingState& st) {
    static char sink[1];
    const unsigned n = st.spec.stuck + st.spec.blocked;
    if (n == 0) {
        return;
    }
    int fd = stuck_pipe();
    unsigned flags = st.spec.async ? IOSQE_ASYNC : 0;
    if ((st.ring.flags & IORING_SETUP_SQPOLL) &&
        !(st.ring.features & IORING_FEAT_SQPOLL_NONFIXED)) {
        if (const int ret = io_uring_register_files(&st.ring, &fd, 1); ret < 0) {
            die_ring(st, "io_uring_register_files for the stuck= reads: " + errno_text(-ret));
        }
        fd = 0;
        flags |= IOSQE_FIXED_FILE;
    }
    for (unsigned queued = 0; queued < n;) {
        const unsigned chunk = std::min(n - queued, st.ring.sq.ring_entries);
        for (unsigned i = 0; i < chunk; ++i, ++queued) {
            io_uring_sqe* sqe = io_uring_get_sqe(&st.ring);
            if (sqe == nullptr) {  // cannot happen: the kernel consumed every earlier chunk
                die_ring(st, "no free SQE for the stuck= reads");
            }
            if (queued < st.spec.stuck) {
                io_uring_prep_read(sqe, fd, sink, sizeof sink, ~std::uint64_t{0});
            } else {
                io_uring_prep_splice(sqe, fd, -1, null_sink(), -1, 1, 0);
            }
            io_uring_sqe_set_flags(sqe, flags);
            io_uring_sqe_set_data64(sqe, kStuckUserData | queued);
        }
        if (const int ret = submit_all(st.ring); ret < 0) {
            die_ring(st,
                     "submitting the stuck= reads or blocked= splices failed: " + errno_text(-ret));
        }
    }
    // Nothing else is in flight yet, so any CQE is a stuck read or splice that did not wait.
    io_uring_cqe* cqe = nullptr;
    if (io_uring_peek_cqe(&st.ring, &cqe) == 0) {
        die_ring(
            st, std::string(cqe->user_data - kStuckUserData < st.spec.stuck ? "a stuck= read"
                                                                            : "a blocked= splice") +
                    " completed at once with " +
                    (cqe->res < 0 ? errno_text(-cqe->res) : std::to_string(cqe->res)) +
                    " instead of waiting on its pipe");
    }
}

}  // namespace

std::string describe(const RingSpec& spec) {
    std::string out =
        "mode=" + std::string(mode_name(spec.mode)) + " depth=" + std::to_string(spec.depth);
    if (spec.idle_ns) {
        out += " idle_ns=" + std::to_string(*spec.idle_ns);
    } else if (uses_sqpoll(spec.mode)) {
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
    if (spec.async) {
        out += " async";
    }
    if (spec.overflow > 0) {
        out += " overflow=" + std::to_string(spec.overflow);
    }
    if (spec.blocked > 0) {
        out += " blocked=" + std::to_string(spec.blocked);
    }
    if (spec.stuck > 0) {
        out += " stuck=" + std::to_string(spec.stuck);
    }
    if (spec.max_workers > 0) {
        out += " max_workers=" + std::to_string(spec.max_workers);
    }
    if (spec.cq > 0) {
        out += " cq=" + std::to_string(spec.cq);
    }
    if (spec.direct) {
        out += " direct";
    }
    if (spec.bufs > 0) {
        out += " bufs=" + std::to_string(spec.bufs);
    }
    if (spec.fanout > 0) {
        out += " fanout=" + std::to_string(spec.fanout);
    }
    if (spec.pipes > 0) {
        out += " pipes=" + std::to_string(spec.pipes);
    }
    if (spec.defer) {
        out += " defer";
    }
    if (spec.busy > 0) {
        out += " busy=" + std::to_string(spec.busy);
    }
    if (spec.coop) {
        out += " coop";
    }
    return out;
}

int submit_all(io_uring& ring) {
    using namespace std::chrono_literals;
    const bool sqpoll = (ring.flags & IORING_SETUP_SQPOLL) != 0;
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    for (;;) {
        // For SQPOLL this only wakes the SQ thread if it sleeps; the kernel consumes the rest.
        const int ret = io_uring_submit(&ring);
        if (ret < 0 && ret != -EINTR && ret != -EAGAIN) {
            return ret;
        }
        if (io_uring_sq_ready(&ring) == 0) {
            return 0;
        }
        if (std::chrono::steady_clock::now() >= give_up) {
            return -ETIMEDOUT;
        }
        std::this_thread::sleep_for(sqpoll ? 20us : 1ms);
    }
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

namespace {

bool any_ring_does(const LoadConfig& cfg, Op op, bool direct) {
    return std::any_of(cfg.rings.begin(), cfg.rings.end(), [op, direct](const RingSpec& r) {
        return ring_op(r) == op && r.direct == direct;
    });
}

// op=write's file: a regular file in $TMPDIR (or /tmp), unlinked as soon as it exists. Buffered,
// so that every write is work the kernel hashes to the file when it goes to io-wq; with
// `direct`, O_DIRECT, so that a filesystem that can write without blocking does so inline.
int open_scratch(bool direct) {
    const char* env = std::getenv("TMPDIR");
    std::string path =
        std::string(env != nullptr && *env != '\0' ? env : "/tmp") + "/iouscope-load-XXXXXX";
    const int fd = mkostemp(path.data(), O_CLOEXEC | (direct ? O_DIRECT : 0));
    if (fd < 0) {
        const int err = errno;
        die(std::string(direct ? "op=write,direct" : "op=write") +
            ": cannot create a scratch file as " + path + ": " + errno_text(err) +
            (direct && err == EINVAL ? "; the filesystem may not support O_DIRECT (tmpfs does "
                                       "not): set TMPDIR to one that does"
                                     : "; set TMPDIR to a writable directory"));
    }
    unlink(path.c_str());
    return fd;
}

// The blocks the O_DIRECT writes will overwrite, written once now (slot i writes block i): a
// write that allocates a block cannot be issued without blocking, and every such write would go
// to io-wq. Applications that write O_DIRECT allocate their files first too.
void allocate_direct_blocks(int fd, unsigned blocks) {
    std::unique_ptr<void, decltype(&std::free)> zeros(std::aligned_alloc(kBlockSize, kBlockSize),
                                                      &std::free);
    if (!zeros) die("aligned_alloc for the op=write,direct scratch file: out of memory");
    std::memset(zeros.get(), 0, kBlockSize);
    for (unsigned i = 0; i < blocks; ++i) {
        if (pwrite(fd, zeros.get(), kBlockSize, static_cast<off_t>(i) * kBlockSize) !=
            static_cast<ssize_t>(kBlockSize)) {
            die("op=write,direct: cannot write block " + std::to_string(i) +
                " of the scratch file: " + errno_text(errno));
        }
    }
    if (fsync(fd) != 0) die("op=write,direct: fsync of the scratch file: " + errno_text(errno));
}

}  // namespace

Workload open_workload(const LoadConfig& cfg) {
    Workload wl;
    if (any_ring_does(cfg, Op::Write, false)) {
        wl.scratch_fd = open_scratch(false);
    }
    if (any_ring_does(cfg, Op::Write, true)) {
        wl.direct_fd = open_scratch(true);
        unsigned depth = 0;
        for (const auto& r : cfg.rings)
            if (ring_op(r) == Op::Write && r.direct) depth = std::max(depth, r.depth);
        allocate_direct_blocks(wl.direct_fd, depth);
    }
    if (!any_ring_does(cfg, Op::Read, false) && !any_ring_does(cfg, Op::Read, true)) {
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

Rings create_rings(const LoadConfig& cfg) {
    Rings rings;
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
            die(setup_failure(*st, ret, memlock_note));
        }
        st->open = true;
        if (st->spec.overflow > 0 && !(st->ring.features & IORING_FEAT_NODROP)) {
            die("ring " + std::to_string(i) + " (" + describe(st->spec) +
                "): overflow= needs IORING_FEAT_NODROP (Linux 5.5 or later), which this kernel "
                "lacks: it would drop the overflowing CQEs instead of keeping them");
        }
        limit_workers(*st);
        park_stuck_requests(*st);
        rings.push_back(std::move(st));
    }
    return rings;
}

}  // namespace iouscope::load
