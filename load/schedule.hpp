// The time plan every ring of an iouscope-load run follows: one steady-clock schedule with the
// deadline and the pause windows, and when the k-th SQE of a rate-limited ring is due. Inline
// (header only) because the submit loop asks it on every pass.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>

#include "config.hpp"

namespace iouscope::load {

using Clock = std::chrono::steady_clock;
using std::chrono::nanoseconds;

// One schedule for all rings so that pause windows line up and every ring sees the same deadline.
class Schedule {
public:
    Schedule(Clock::time_point start, std::optional<nanoseconds> duration,
             std::optional<PauseSpec> pause)
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
    std::optional<PauseSpec> pause_;
};

// SQE k (counting from 0) is due at active time k/rate, so the first one goes out immediately
// and a slow rate never waits a whole period before starting.
inline std::uint64_t sqes_due(nanoseconds active, std::uint64_t rate) {
    const auto due = static_cast<unsigned __int128>(std::max<std::int64_t>(active.count(), 0)) *
                     rate / 1'000'000'000u;
    return static_cast<std::uint64_t>(
               std::min<unsigned __int128>(due, std::numeric_limits<std::uint64_t>::max() - 1)) +
           1;
}

inline nanoseconds due_at(std::uint64_t k, std::uint64_t rate) {
    const unsigned __int128 ns =
        (static_cast<unsigned __int128>(k) * 1'000'000'000u + rate - 1) / rate;
    // Capped far beyond any realistic run so time_point arithmetic cannot overflow.
    constexpr unsigned __int128 kCap = 1'000'000'000ull * 3600 * 24 * 365 * 100;
    return nanoseconds{static_cast<std::int64_t>(std::min(ns, kCap))};
}

}  // namespace iouscope::load
