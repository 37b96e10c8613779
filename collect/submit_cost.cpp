#include "collect/submit_cost.hpp"

#include <fmt/format.h>
#include <liburing.h>
#include <spdlog/spdlog.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace iouscope {

namespace {

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// One round: `n` submissions of one NOP each, waited for in the same call, as an application
// without SQPOLL would submit one request at a time.
bool round_seconds(io_uring& ring, int n, double& per_call) {
    const double start = thread_cpu_seconds();
    for (int i = 0; i < n; ++i) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        if (!sqe) return false;
        io_uring_prep_nop(sqe);
        if (io_uring_submit_and_wait(&ring, 1) != 1) return false;
        io_uring_cqe* cqe = nullptr;
        if (io_uring_peek_cqe(&ring, &cqe) != 0) return false;
        io_uring_cqe_seen(&ring, cqe);
    }
    per_call = (thread_cpu_seconds() - start) / n;
    return true;
}

}  // namespace

std::optional<SubmitCost> measure_submit_cost(std::string& err) {
    constexpr int kRounds = 7, kCalls = 500;
    io_uring ring;
    if (int rc = io_uring_queue_init(8, &ring, 0); rc < 0) {
        err = fmt::format("io_uring_queue_init: {}", std::strerror(-rc));
        return std::nullopt;
    }
    // Thread CPU time, not wall time: another tenant's load stretches the wall clock, not this.
    // The median of several rounds drops a round that a page fault or a migration disturbed.
    std::array<double, kRounds> per_call{};
    double warm = 0;
    bool ok = round_seconds(ring, 50, warm);
    for (int r = 0; ok && r < kRounds; ++r) ok = round_seconds(ring, kCalls, per_call[r]);
    io_uring_queue_exit(&ring);
    if (!ok) {
        err = "a NOP submitted to measure io_uring_enter did not complete";
        return std::nullopt;
    }
    std::sort(per_call.begin(), per_call.end());
    return SubmitCost{per_call[kRounds / 2],
                      fmt::format("measured at start-up: median of {} rounds of {} "
                                  "io_uring_enter calls, each submitting and reaping one NOP",
                                  kRounds, kCalls)};
}

void measure_submit_cost(AdviseOptions& opts) {
    std::string err;
    if (auto c = measure_submit_cost(err)) {
        opts.submit_syscall_seconds = c->seconds;
        opts.submit_cost_source = c->source;
        spdlog::info("advisor: one io_uring_enter submitting one NOP costs {:.2f} us of CPU here",
                     c->seconds * 1e6);
        return;
    }
    spdlog::warn("advisor: cannot measure what a submission costs ({}); assuming {:.1f} us", err,
                 opts.submit_syscall_seconds * 1e6);
}

}  // namespace iouscope
