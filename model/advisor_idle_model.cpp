// The advisor's idle-time model (model/advisor_idle_model.hpp): for a setting T the thread spins
// min(gap, T) of every gap between SQEs and sleeps once per gap longer than T, in nanoseconds or,
// upstream, in jiffies; and the curve of candidate settings drawn from it.
#include "model/advisor_idle_model.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>

namespace iouscope {

namespace {

// Gap bucket contribution to the model: CPU (ns) and sleeps for gaps in one bucket.
void add_bucket(double c, double sum_ns, double lo, double hi, double t_ns, double& cpu,
                double& sleeps) {
    if (c == 0) return;
    if (hi <= t_ns) {
        cpu += sum_ns;
    } else if (lo >= t_ns || !std::isfinite(hi)) {
        cpu += c * t_ns;
        sleeps += c;
    } else {
        // The threshold falls inside: spread the bucket's gaps evenly over it.
        const double f = (t_ns - lo) / (hi - lo);
        cpu += c * f * (lo + t_ns) / 2 + c * (1 - f) * t_ns;
        sleeps += c * (1 - f);
    }
}

}  // namespace

GapWindow gap_window(const WorkGaps& from, const WorkGaps& to, double window_s) {
    GapWindow w;
    w.window_s = window_s;
    w.count.assign(to.count.size(), 0);
    w.sum_ns.assign(to.count.size(), 0);
    for (std::size_t i = 0; i < to.count.size() && i < to.sum_ns.size(); ++i) {
        const std::uint64_t c0 = i < from.count.size() ? from.count[i] : 0;
        const std::uint64_t s0 = i < from.sum_ns.size() ? from.sum_ns[i] : 0;
        w.count[i] = static_cast<double>(to.count[i] - std::min(to.count[i], c0));
        w.sum_ns[i] = static_cast<double>(to.sum_ns[i] - std::min(to.sum_ns[i], s0));
    }
    if (to.recorded_seconds >= 0 && from.recorded_seconds >= 0) {
        const double recorded = to.recorded_seconds - from.recorded_seconds;
        const double scale = recorded > 0 ? window_s / recorded : 0;
        for (std::size_t i = 0; i < w.count.size(); ++i) {
            w.count[i] *= scale;
            w.sum_ns[i] *= scale;
        }
        return w;
    }
    w.open_start_s = std::max(0.0, from.open_gap_seconds);
    w.open_end_s = std::max(0.0, to.open_gap_seconds);
    // No SQE at all in the window: the gap open at its start simply grew.
    return w;
}

GapWindow thread_gap_window(const ThreadSnapshot& from, const ThreadSnapshot& to, double window_s) {
    GapWindow w = gap_window(from.gaps, to.gaps, window_s);
    double gaps = 0;
    for (auto c : w.count) gaps += c;
    if (gaps > 0) w.work_per_gap_s = std::max(0.0, to.work_seconds - from.work_seconds) / gaps;
    return w;
}

IdleCost idle_cost_fixed(const GapWindow& w, double spin_s) {
    const double t = spin_s * 1e9;
    double cpu = 0, sleeps = 0;
    for (std::size_t i = 0; i < w.count.size(); ++i)
        add_bucket(w.count[i], w.sum_ns[i], gap_bucket_lower_ns(i), gap_bucket_upper_ns(i), t, cpu,
                   sleeps);
    // The gap open at the start ended inside the window (and is in the buckets) or is still
    // open at the end; either way its part before the window is not ours to count.
    cpu += std::min(w.open_end_s * 1e9, t);
    cpu -= std::min(w.open_start_s * 1e9, t);
    // A gap open at both ends with no SQE in between is one gap, not two.
    // Each sleep is followed by the work of the batch that ends it, which its gap holds but its
    // charge (the idle) left out.
    cpu += sleeps * w.work_per_gap_s * 1e9;
    IdleCost c;
    c.cpu_seconds = std::clamp(cpu / 1e9, 0.0, w.window_s);
    c.wakeups = sleeps;
    return c;
}

IdleCost idle_cost_jiffies(const GapWindow& w, std::uint64_t jiffies, unsigned hz) {
    constexpr int kSteps = 8;
    const double tick = 1.0 / hz;
    IdleCost sum;
    for (int k = 0; k < kSteps; ++k) {
        auto c = idle_cost_fixed(w, (jiffies + (k + 0.5) / kSteps) * tick);
        sum.cpu_seconds += c.cpu_seconds / kSteps;
        sum.wakeups += c.wakeups / kSteps;
    }
    return sum;
}

std::vector<IdleCurvePoint> idle_curve(const GapWindow& w, double current_s, bool current_ns,
                                       bool candidates_ns, unsigned hz) {
    std::vector<IdleCurvePoint> out;
    if (w.window_s <= 0) return out;
    auto add = [&](double setting, double effective, IdleCost c, bool current) {
        IdleCurvePoint p;
        p.setting_seconds = setting;
        p.effective_seconds = effective;
        p.cpu_cores = c.cpu_seconds / w.window_s;
        p.wakeups_per_second = c.wakeups / w.window_s;
        p.current = current;
        out.push_back(p);
    };
    static const double kMs[] = {1, 2, 3, 4, 5, 8, 10, 15, 20, 30, 50, 100, 200, 500, 1000, 2000};
    if (!current_ns && hz == 0) return out;
    if (candidates_ns) {
        static const double kUs[] = {20, 50, 100, 200, 500};
        std::set<double> settings(std::begin(kUs), std::end(kUs));
        for (double ms : kMs) settings.insert(ms * 1e3);
        // A jiffies setting of the same nominal value is another setting: keep both.
        for (double us : settings)
            if (!current_ns || std::abs(us * 1e-6 - current_s) > 1e-9)
                add(us * 1e-6, us * 1e-6, idle_cost_fixed(w, us * 1e-6), false);
        if (current_ns) {
            add(current_s, current_s, idle_cost_fixed(w, current_s), true);
        } else {
            const auto cur_j = static_cast<std::uint64_t>(std::llround(current_s * hz));
            add(current_s, (cur_j + 0.5) / hz, idle_cost_jiffies(w, cur_j, hz), true);
        }
    } else {
        if (hz == 0) return out;
        // msecs_to_jiffies() rounds up; several ms values share a tick count: keep the smallest.
        const auto cur_j = static_cast<std::uint64_t>(std::llround(current_s * hz));
        std::map<std::uint64_t, double> by_jiffies;
        for (double ms : kMs) {
            const auto j = static_cast<std::uint64_t>(std::ceil(ms * hz / 1000 - 1e-9));
            if (j != cur_j) by_jiffies.try_emplace(j, ms / 1e3);
        }
        for (const auto& [j, setting] : by_jiffies)
            add(setting, (j + 0.5) / hz, idle_cost_jiffies(w, j, hz), false);
        add(current_s, (cur_j + 0.5) / hz, idle_cost_jiffies(w, cur_j, hz), true);
    }
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.setting_seconds < b.setting_seconds; });
    return out;
}

}  // namespace iouscope
