// iouscope-load's report (report.hpp): the setup and final lines of every ring, the done line,
// the failures and hints on stderr, and the progress line.
#include "report.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include "command_line.hpp"
#include "exit.hpp"
#include "sq_thread.hpp"

namespace iouscope::load {

namespace {

using namespace std::chrono_literals;

// The keys appended after the original ones: what the ring submits, and on the final line how
// many CQEs its overflow= sent through the CQ overflow list and how many of its bufs= reads
// found no buffer.
std::string extra_keys(const RingState& st, bool json, bool setup) {
    const std::string op(op_name(ring_op(st.spec)));
    const std::string stuck = std::to_string(st.spec.stuck);
    const std::string blocked = std::to_string(st.spec.blocked);
    const std::string overflowed = std::to_string(st.overflowed);
    const std::string enobufs = std::to_string(st.enobufs);
    if (json) {
        return ",\"op\":\"" + op + "\",\"async\":" + (st.spec.async ? "true" : "false") +
               ",\"stuck\":" + stuck + ",\"blocked\":" + blocked +
               (setup ? "" : ",\"overflowed\":" + overflowed + ",\"enobufs\":" + enobufs);
    }
    return " op=" + op + " async=" + (st.spec.async ? "1" : "0") + " stuck=" + stuck +
           " blocked=" + blocked +
           (setup ? "" : " overflowed=" + overflowed + " enobufs=" + enobufs);
}

std::string ring_line(const RingState& st, bool json, bool setup, std::uint64_t sqes,
                      std::uint64_t cqes) {
    const std::string pid = std::to_string(getpid());
    const std::string fd = std::to_string(st.ring.ring_fd);
    const std::string mode(mode_name(st.spec.mode));
    // What io_uring_setup gave the ring: its flags and the queue sizes the kernel chose.
    char flags[16];
    std::snprintf(flags, sizeof flags, "0x%x", st.ring.flags);
    const std::string sq = std::to_string(st.ring.sq.ring_entries);
    const std::string cq = std::to_string(st.ring.cq.ring_entries);
    if (json) {
        return std::string("{\"phase\":\"") + (setup ? "setup" : "final") +
               "\",\"index\":" + std::to_string(st.index) + ",\"pid\":" + pid + ",\"fd\":" + fd +
               ",\"mode\":\"" + mode + "\",\"sq_thread\":" + std::to_string(st.sq_thread) +
               ",\"sqes\":" + std::to_string(sqes) + ",\"cqes\":" + std::to_string(cqes) +
               ",\"setup_flags\":" + std::to_string(st.ring.flags) + ",\"sq_entries\":" + sq +
               ",\"cq_entries\":" + cq + extra_keys(st, json, setup) + "}";
    }
    return std::string(setup ? "setup" : "ring") + " index=" + std::to_string(st.index) +
           " pid=" + pid + " fd=" + fd + " mode=" + mode +
           " sq_thread=" + std::to_string(st.sq_thread) + " sqes=" + std::to_string(sqes) +
           " cqes=" + std::to_string(cqes) + " setup_flags=" + flags + " sq_entries=" + sq +
           " cq_entries=" + cq + extra_keys(st, json, setup);
}

std::string completion_hint(int err, const RingSpec& spec, Op op) {
    if (err == EOPNOTSUPP && uses_iopoll(spec.mode)) {
        return op == Op::Read ? "; the device does not support polled I/O (see "
                                "/sys/block/<dev>/queue/io_poll and the driver's poll queues)"
                              : "; this kernel does not support NOPs on IOPOLL rings";
    }
    if (err == EINVAL && op == Op::Read) {
        return "; the file or device may reject 4 KiB-aligned O_DIRECT reads";
    }
    return {};
}

}  // namespace

void emit(const std::string& line) {
    std::fputs(line.c_str(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
}

void report_setup(const Rings& rings, bool json) {
    for (const auto& st : rings) {
        emit(ring_line(*st, json, true, 0, 0));
    }
    emit(json ? "{\"started\":true}" : "started");
}

void report_final(Rings& rings, bool json) {
    std::uint64_t total = 0;
    for (auto& st : rings) {
        // Re-read in case the setup-time read lost the race with a slow SQ thread start.
        if (st->sq_thread < 0 && uses_sqpoll(st->spec.mode)) {
            st->sq_thread = sq_thread_tid(*st);
        }
        emit(ring_line(*st, json, false, st->sqes, st->cqes));
        total += st->sqes;
    }
    emit(json ? "{\"done\":true,\"rings\":" + std::to_string(rings.size()) +
                    ",\"sqes\":" + std::to_string(total) + "}"
              : "done rings=" + std::to_string(rings.size()) + " sqes=" + std::to_string(total));
}

// stuck= reads and blocked= splices are meant to stay in flight until the ring is closed; one
// that completed makes the report's stuck= or blocked= wrong.
bool report_stuck_completions(const RingState& st) {
    if (st.stuck_cqes == 0) {
        return false;
    }
    const std::string res = st.first_stuck_res < 0 ? errno_text(-st.first_stuck_res)
                                                   : std::to_string(st.first_stuck_res);
    std::fprintf(stderr,
                 "%s: ring %zu (%s): %llu of %u stuck= reads and blocked= splices completed "
                 "during the run (first result: %s); they should stay in flight until the ring "
                 "is closed\n",
                 kProg, st.index, describe(st.spec).c_str(),
                 static_cast<unsigned long long>(st.stuck_cqes), st.spec.stuck + st.spec.blocked,
                 res.c_str());
    return true;
}

int report_failures(const Rings& rings) {
    int status = kExitOk;
    for (const auto& st : rings) {
        if (report_stuck_completions(*st)) {
            status = kExitFailure;
        }
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
                completion_hint(st->first_cqe_error, st->spec, ring_op(st->spec)).c_str());
            status = kExitFailure;
        }
    }
    return status;
}

Progress::Progress(Clock::time_point start)
    : enabled_(isatty(STDERR_FILENO) == 1), start_(start), next_(start + 2s), last_time_(start) {}

void Progress::tick(const Rings& rings) {
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

void Progress::clear() {
    if (shown_) {
        std::fputs("\r\x1b[K", stderr);
        std::fflush(stderr);
        shown_ = false;
    }
}

}  // namespace iouscope::load
