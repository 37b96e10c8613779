#include "collect/gap_duty.hpp"

#include <spdlog/spdlog.h>

#include "collect/bpf_link.hpp"
#include "common/clock.hpp"

namespace iouscope {

GapDutyCycle::GapDutyCycle(std::vector<bpf_program*> programs, volatile __u64* start_ns,
                           volatile __u64* end_ns, GapSamplingConfig cfg, GapDutyHooks hooks)
    : programs_(std::move(programs)),
      start_ns_(start_ns),
      end_ns_(end_ns),
      cfg_(cfg),
      hooks_(std::move(hooks)),
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

void GapDutyCycle::sleep_until(std::stop_token stop, Clock::time_point t) {
    std::unique_lock lock(sleep_mu_);
    sleep_cv_.wait_until(lock, stop, t, [] { return false; });
}

// Attach, open the window, wait out the on-time (or less, when it has recorded enough), close it,
// detach, wait for the next period. The BPF side stops recording at the window's end on its own;
// the detach only ends the cost.
void GapDutyCycle::run(std::stop_token stop) {
    auto next = Clock::now();
    while (!stop.stop_requested()) {
        if (attach()) {
            open_window(stop);
            links_.clear();
        }
        next += cfg_.period;
        sleep_until(stop, next);
    }
    links_.clear();
}

void GapDutyCycle::open_window(std::stop_token stop) {
    const std::uint64_t start = monotonic_ns();
    const std::uint64_t end = start + static_cast<std::uint64_t>(cfg_.on.count());
    *start_ns_ = start;
    __atomic_store_n(end_ns_, end, __ATOMIC_RELEASE);
    {
        std::lock_guard lock(mu_);
        ledger_.open(start, end);
    }
    const auto opened = Clock::now();
    const auto deadline = opened + cfg_.on;
    const auto filled = opened + kGapCutoff + kMinRecordedPerWindow;
    // Polled: the gap counts are in a BPF hash map, and a look four times a second costs the
    // daemon a few map reads while the window's own cost is per SQE.
    constexpr auto kPoll = std::chrono::milliseconds(250);
    const bool count = hooks_.gaps_recorded && cfg_.enough_gaps;
    const std::uint64_t base = count ? hooks_.gaps_recorded() : 0;
    for (auto t = opened + kPoll; t < deadline && !stop.stop_requested(); t += kPoll) {
        sleep_until(stop, t);
        if (hooks_.nothing_to_record && hooks_.nothing_to_record()) return close_early(stop);
        if (count && t >= filled && enough_recorded(base)) return close_early(stop);
    }
    sleep_until(stop, deadline);
}

bool GapDutyCycle::enough_recorded(std::uint64_t base) const {
    const std::uint64_t now = hooks_.gaps_recorded();
    // A thread that exits takes its counts with it: never count that as recording.
    return now > base && now - base >= cfg_.enough_gaps;
}

// The end moves a millisecond ahead, not to now: a program that read the old end a moment ago
// still records inside the new one, so the ledger's time covers every gap recorded.
void GapDutyCycle::close_early(std::stop_token stop) {
    constexpr auto kMargin = std::chrono::milliseconds(1);
    const std::uint64_t end =
        monotonic_ns() + static_cast<std::uint64_t>(std::chrono::nanoseconds(kMargin).count());
    __atomic_store_n(end_ns_, end, __ATOMIC_RELEASE);
    {
        std::lock_guard lock(mu_);
        ledger_.close(end);
    }
    sleep_until(stop, Clock::now() + 2 * kMargin);
}

GapSampling GapDutyCycle::state(std::uint64_t now_ns) const {
    std::lock_guard lock(mu_);
    GapSampling s;
    s.on_seconds = std::chrono::duration<double>(cfg_.on).count();
    s.period_seconds = std::chrono::duration<double>(cfg_.period).count();
    s.cutoff_seconds = std::chrono::duration<double>(kGapCutoff).count();
    s.recorded_seconds = ledger_.recorded_seconds(now_ns);
    s.attached_seconds = ledger_.attached_seconds(now_ns);
    s.windows = ledger_.windows();
    s.closed_early = ledger_.closed_early();
    s.attach_failures = attach_failures_;
    s.active = ledger_.active(now_ns);
    return s;
}

}  // namespace iouscope
