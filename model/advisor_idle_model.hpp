#pragma once
// The advisor's idle-time model: what an SQ thread would cost at any sq_thread_idle, from the
// gaps between its SQEs over a window (model/advisor_idle_model.cpp). Exposed for the tests and
// bench/idle_model; model/advisor.hpp includes it.
#include <cstdint>
#include <vector>

#include "model/snapshot.hpp"

namespace iouscope {

// Gaps are the differences of two WorkGaps.
struct GapWindow {
    // Per IOU_GAP_BUCKETS bucket; estimates for the whole window where the probe is sampled.
    std::vector<double> count;
    std::vector<double> sum_ns;
    double open_start_s = 0;  // time since the latest SQE at the window start (0 if none)
    double open_end_s = 0;    // the same at the window end
    double window_s = 0;
    // The thread's mean work per gap. A gap is measured from one batch's end to the next's, so
    // it holds the next batch's work; one longer than the idle is charged the idle, then the
    // sleep, then this work after the wake-up.
    double work_per_gap_s = 0;
};

// Where the probe is sampled (recorded_seconds >= 0), the counts and sums recorded in the window
// are scaled by window_s over the time recorded in it (include/iouscope/gap_sampling.h); the
// estimate covers the whole window, so no gap is open at its ends.
GapWindow gap_window(const WorkGaps& from, const WorkGaps& to, double window_s);
// The window of one SQ thread between two snapshots, with its work per gap.
GapWindow thread_gap_window(const ThreadSnapshot& from, const ThreadSnapshot& to, double window_s);

// CPU time (seconds) and sleeps ended by work in the window, had the thread spun exactly
// `spin_s` after each SQE before sleeping.
struct IdleCost {
    double cpu_seconds = 0;
    double wakeups = 0;
};
IdleCost idle_cost_fixed(const GapWindow& w, double spin_s);
// Upstream kernels: sq_thread_idle of `jiffies` ticks spins for (jiffies, jiffies+1] ticks
// depending on where in a tick the last SQE fell; averaged over that tick.
IdleCost idle_cost_jiffies(const GapWindow& w, std::uint64_t jiffies, unsigned hz);

// Candidate sq_thread_idle values for a thread, with their predicted cost, sorted by setting.
std::vector<IdleCurvePoint> idle_curve(const GapWindow& w, double current_setting_s,
                                       bool current_ns, bool candidates_ns, unsigned hz);

}  // namespace iouscope
