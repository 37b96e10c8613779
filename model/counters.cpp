#include "model/counters.hpp"

#include <algorithm>
#include <cmath>

namespace iouscope {

bool WrappingCounter32::continues(std::uint32_t raw) const {
    if (!last_ || raw >= *last_) return true;
    return *last_ >= 0xC000'0000u && raw < 0x4000'0000u;
}

std::uint64_t WrappingCounter32::observe(std::uint32_t raw) {
    if (!last_)
        total_ = raw;
    else
        total_ += static_cast<std::uint32_t>(raw - *last_);
    last_ = raw;
    return total_;
}

double jain_fairness(std::span<const double> allocations) {
    double sum = 0, sum_sq = 0;
    for (double x : allocations) {
        sum += x;
        sum_sq += x * x;
    }
    if (allocations.empty() || sum_sq == 0) return 1.0;
    return (sum * sum) / (static_cast<double>(allocations.size()) * sum_sq);
}

CpuSplit split_with_work_time(std::uint64_t cpu_ns, std::uint64_t work_ns) {
    std::uint64_t work = std::min(cpu_ns, work_ns);
    return {work, cpu_ns - work};
}

CpuSplit estimate_split(std::uint64_t cpu_ns, std::uint64_t sleeps, std::uint64_t idle_ns,
                        bool made_progress) {
    if (!made_progress) return {0, cpu_ns};
    // Saturating multiply: sleeps * idle_ns can only exceed cpu_ns, never matter beyond it.
    std::uint64_t spin = (idle_ns != 0 && sleeps > cpu_ns / idle_ns) ? cpu_ns : sleeps * idle_ns;
    spin = std::min(spin, cpu_ns);
    return {cpu_ns - spin, spin};
}

CumulativeBuckets log2_to_cumulative(std::span<const std::uint64_t> hist, std::size_t first) {
    CumulativeBuckets out;
    std::uint64_t running = 0;
    for (std::size_t i = 0; i < hist.size(); ++i) {
        running += hist[i];
        if (i >= first && i + 1 < hist.size()) {
            out.upper_bounds.push_back(std::ldexp(1.0, static_cast<int>(i + 1)));
            out.cumulative.push_back(running);
        }
    }
    out.count = running;
    return out;
}

std::optional<double> log2_quantile(std::span<const std::uint64_t> hist, double q) {
    std::uint64_t total = 0;
    for (auto c : hist) total += c;
    if (total == 0) return std::nullopt;
    q = std::clamp(q, 0.0, 1.0);
    double rank = q * static_cast<double>(total);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < hist.size(); ++i) {
        if (hist[i] == 0) continue;
        if (static_cast<double>(seen + hist[i]) >= rank) {
            double lo = i == 0 ? 0.0 : std::ldexp(1.0, static_cast<int>(i));
            double hi = std::ldexp(1.0, static_cast<int>(i + 1));
            double frac = (rank - static_cast<double>(seen)) / static_cast<double>(hist[i]);
            return lo + (hi - lo) * std::clamp(frac, 0.0, 1.0);
        }
        seen += hist[i];
    }
    return std::ldexp(1.0, static_cast<int>(hist.size()));
}

}  // namespace iouscope
