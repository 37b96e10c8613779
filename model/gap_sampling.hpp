#pragma once
// The duty cycle of the per-SQE work-gap probe, apart from the BPF that runs it
// (collect/gap_duty.hpp): its configuration, and the time each window recorded, which the
// advisor scales a window's gap counts by (include/iouscope/gap_sampling.h has the estimator).
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace iouscope {

// A window records nothing in its first kGapCutoff, which only finds where each thread's gaps
// start. It covers the longest sq_thread_idle the advisor prices (2 s, model/advisor.cpp) and is
// a bucket bound (2^31 ns, include/iouscope/gap_bucket.h), so a gap cut at a window's start
// falls in a bucket wholly above every priced setting and counts as a sleep at each.
inline constexpr std::chrono::nanoseconds kGapCutoff{1LL << 31};

// A window may close before its on-time once it has recorded this long and kEnoughGaps gaps: the
// advisor wants at least a second recorded in its window (model/advisor.cpp), this leaves a
// margin over it. A busy workload, where the per-SQE program costs most, fills a window in a
// fraction of a second; a slow one keeps the whole on-time, where it costs next to nothing.
inline constexpr std::chrono::nanoseconds kMinRecordedPerWindow{std::chrono::milliseconds(1250)};
inline constexpr std::uint64_t kEnoughGaps = 20'000;

struct GapSamplingConfig {
    std::chrono::nanoseconds on{std::chrono::seconds(6)};
    std::chrono::nanoseconds period{std::chrono::seconds(60)};  // 0: every gap, at full rate
    // Gaps (summed over threads) after which a window closes early; 0 keeps every window open
    // for its whole on-time.
    std::uint64_t enough_gaps = kEnoughGaps;
    bool enabled() const { return period.count() > 0; }
    static GapSamplingConfig off() {
        return {std::chrono::nanoseconds(0), std::chrono::nanoseconds(0), 0};
    }
};

// Parses --probes.gap-sampling: "off", or ON/PERIOD as durations ("6s/60s"). The on-window must
// outlast kGapCutoff (2.15 s) by a little and be shorter than the period. Returns the error.
std::optional<std::string> parse_gap_sampling(std::string_view text, GapSamplingConfig& out);

// The windows opened so far and the time they recorded, on the CLOCK_MONOTONIC nanoseconds of
// bpf_ktime_get_ns(). Not thread-safe: GapDutyCycle locks around it.
class GapWindowLedger {
public:
    explicit GapWindowLedger(std::uint64_t cutoff_ns) : cutoff_ns_(cutoff_ns) {}
    // A window [start, end) opened; the previous one, if any, is over.
    void open(std::uint64_t start_ns, std::uint64_t end_ns);
    // The open window ends at end_ns instead, if that is sooner (it closed early).
    void close(std::uint64_t end_ns);
    // Seconds of recorded time ([start + cutoff, end) of each window) up to now.
    double recorded_seconds(std::uint64_t now_ns) const;
    // Seconds the windows were open ([start, end) of each) up to now: what the probe cost.
    double attached_seconds(std::uint64_t now_ns) const;
    bool active(std::uint64_t now_ns) const { return now_ns >= start_ns_ && now_ns < end_ns_; }
    std::uint64_t windows() const { return windows_; }
    std::uint64_t closed_early() const { return closed_early_; }

private:
    std::uint64_t recorded(std::uint64_t now_ns) const;
    std::uint64_t attached(std::uint64_t now_ns) const;
    std::uint64_t cutoff_ns_;
    std::uint64_t closed_ns_ = 0;           // recorded time of the windows before the current one
    std::uint64_t closed_attached_ns_ = 0;  // open time of the windows before the current one
    std::uint64_t start_ns_ = 0, end_ns_ = 0;
    std::uint64_t windows_ = 0;
    std::uint64_t closed_early_ = 0;
};

}  // namespace iouscope
