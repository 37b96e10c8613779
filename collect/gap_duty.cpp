#include "collect/gap_duty.hpp"

#include <spdlog/spdlog.h>

#include <condition_variable>

#include "collect/bpf_loader.hpp"
#include "common/clock.hpp"

namespace uringscope {

GapDutyCycle::GapDutyCycle(std::vector<bpf_program*> programs, volatile __u64* start_ns,
                           volatile __u64* end_ns, GapSamplingConfig cfg)
    : programs_(std::move(programs)),
      start_ns_(start_ns),
      end_ns_(end_ns),
      cfg_(cfg),
      ledger_(static_cast<std::uint64_t>(kGapCutoff.count())) {
    thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
}

GapDutyCycle::~GapDutyCycle() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
}

bool GapDutyCycle::attach() {
    std::string why;
    for (auto* prog : programs_) {
        auto link = AttachedProbe::make(prog, why);
        if (!link) {
            links_.clear();
            std::lock_guard lock(mu_);
            if (attach_failures_++ == 0)
                spdlog::warn("probe work_gaps: cannot attach for a sampling window: {}", why);
            return false;
        }
        links_.push_back(std::move(link));
    }
    return true;
}

// Attach, open the window, wait out the on-time, close it, detach, wait for the next period.
// The BPF side stops recording at the window's end on its own; the detach only ends the cost.
void GapDutyCycle::run(std::stop_token stop) {
    std::mutex mu;
    std::condition_variable_any cv;
    auto next = std::chrono::steady_clock::now();
    while (!stop.stop_requested()) {
        if (attach()) {
            const std::uint64_t start = monotonic_ns();
            const std::uint64_t end = start + static_cast<std::uint64_t>(cfg_.on.count());
            *start_ns_ = start;
            __atomic_store_n(end_ns_, end, __ATOMIC_RELEASE);
            {
                std::lock_guard lock(mu_);
                ledger_.open(start, end);
            }
            std::unique_lock lock(mu);
            cv.wait_for(lock, stop, cfg_.on, [] { return false; });
            links_.clear();
        }
        next += cfg_.period;
        std::unique_lock lock(mu);
        cv.wait_until(lock, stop, next, [] { return false; });
    }
    links_.clear();
}

GapSampling GapDutyCycle::state(std::uint64_t now_ns) const {
    std::lock_guard lock(mu_);
    GapSampling s;
    s.on_seconds = std::chrono::duration<double>(cfg_.on).count();
    s.period_seconds = std::chrono::duration<double>(cfg_.period).count();
    s.cutoff_seconds = std::chrono::duration<double>(kGapCutoff).count();
    s.recorded_seconds = ledger_.recorded_seconds(now_ns);
    s.windows = ledger_.windows();
    s.attach_failures = attach_failures_;
    s.active = ledger_.active(now_ns);
    return s;
}

}  // namespace uringscope
