#include "model/gap_sampling.hpp"

#include <algorithm>

#include "common/duration.hpp"

namespace iouscope {

std::optional<std::string> parse_gap_sampling(std::string_view text, GapSamplingConfig& out) {
    if (text == "off") {
        out = GapSamplingConfig::off();
        return std::nullopt;
    }
    const auto slash = text.find('/');
    const std::string shown(text);
    if (slash == std::string_view::npos)
        return "--probes.gap-sampling: \"" + shown +
               "\" is not ON/PERIOD (for example 6s/60s) or off";
    auto on = parse_duration(text.substr(0, slash));
    auto period = parse_duration(text.substr(slash + 1));
    if (!on || !period)
        return "--probes.gap-sampling: \"" + shown +
               "\": ON and PERIOD must be durations (for example 6s/60s)";
    if (*on < std::chrono::seconds(3))
        return "--probes.gap-sampling: the on-window (" + std::string(text.substr(0, slash)) +
               ") must be at least 3s: its first 2.15s only find where each gap starts";
    if (*period <= *on || *period > std::chrono::hours(1))
        return "--probes.gap-sampling: the period (" + std::string(text.substr(slash + 1)) +
               ") must be longer than the on-window and at most 1h";
    out = GapSamplingConfig{*on, *period};
    return std::nullopt;
}

void GapWindowLedger::open(std::uint64_t start_ns, std::uint64_t end_ns) {
    closed_ns_ = recorded(std::max(end_ns_, start_ns));
    closed_attached_ns_ = attached(std::max(end_ns_, start_ns));
    start_ns_ = start_ns;
    end_ns_ = end_ns;
    ++windows_;
}

void GapWindowLedger::close(std::uint64_t end_ns) {
    if (windows_ == 0 || end_ns >= end_ns_) return;
    end_ns_ = std::max(end_ns, start_ns_);
    ++closed_early_;
}

std::uint64_t GapWindowLedger::recorded(std::uint64_t now_ns) const {
    if (windows_ == 0 || now_ns < start_ns_ + cutoff_ns_) return closed_ns_;
    return closed_ns_ + std::min(now_ns, end_ns_) - std::min(end_ns_, start_ns_ + cutoff_ns_);
}

std::uint64_t GapWindowLedger::attached(std::uint64_t now_ns) const {
    if (windows_ == 0 || now_ns < start_ns_) return closed_attached_ns_;
    return closed_attached_ns_ + std::min(now_ns, end_ns_) - start_ns_;
}

double GapWindowLedger::attached_seconds(std::uint64_t now_ns) const {
    return static_cast<double>(attached(now_ns)) / 1e9;
}

double GapWindowLedger::recorded_seconds(std::uint64_t now_ns) const {
    return static_cast<double>(recorded(now_ns)) / 1e9;
}

}  // namespace iouscope
