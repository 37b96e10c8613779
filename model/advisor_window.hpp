#pragma once
// What the advisor's findings share (model/advisor_window.cpp): one SQ thread's window between
// two snapshots, the `from` snapshot indexed, the idle curve of one thread, and the wording of
// figures. Internal to the advisor's files (model/advisor*.cpp).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/advisor.hpp"

namespace iouscope::advisor {

std::string fmt_seconds(double s);
// A sq_thread_idle setting in its unit: nanoseconds or milliseconds.
std::string fmt_setting(double s, bool ns_granular);

// The `from` snapshot indexed once, so judging thousands of rings stays linear.
struct FromIndex {
    std::map<std::int32_t, const ThreadSnapshot*> threads;
    std::map<std::uint64_t, const RingSnapshot*> rings;  // by ctx

    explicit FromIndex(const Snapshot& s) {
        for (const auto& t : s.threads) threads.emplace(t.tid, &t);
        for (const auto& r : s.rings) rings.emplace(r.ctx, &r);
    }
    const ThreadSnapshot* thread(std::int32_t tid) const {
        auto it = threads.find(tid);
        return it == threads.end() ? nullptr : it->second;
    }
    // A ctx address can be reused by a new ring; the id tells them apart.
    const RingSnapshot* ring(const RingSnapshot& now) const {
        auto it = rings.find(now.ctx);
        return it != rings.end() && it->second->id == now.id ? it->second : nullptr;
    }
};

// The growth of a cumulative counter, never negative.
double delta(double a, double b);
double delta(std::uint64_t a, std::uint64_t b);

// Wake latency over the window: the median of the difference of the log2 histograms.
double wake_latency(const ThreadSnapshot& a, const ThreadSnapshot& b, const AdviseOptions& o,
                    bool& measured);

// What the window says about one SQ thread.
struct ThreadWindow {
    const ThreadSnapshot* a;
    const ThreadSnapshot* b;
    double cpu = 0, work = 0, spin = 0, wakeups = 0, sleeps = 0;  // per second
    double sqes = 0;                                              // per second, its rings
    std::vector<const RingSnapshot*> rings;                       // in `to`
};

// The window of every SQ thread of `to` that `from` has too; a note for each that started
// inside the window.
std::vector<ThreadWindow> thread_windows(const FromIndex& from, const Snapshot& to, double window,
                                         Advice& out);

// A finding about one SQ thread, labelled with the thread, its process and its container.
Finding thread_finding(const char* id, const ThreadSnapshot& t);
std::string ring_list(const std::vector<const RingSnapshot*>& rings);

// --- One thread's idle curve ---------------------------------------------------------------

// The least recorded time a sampled window's idle curve is drawn from: one on-window's worth at
// the shortest --probes.gap-sampling (3s, less the 2s cutoff).
constexpr double kMinRecordedSeconds = 1;

// Recorded time of a sampled probe between two snapshots; infinite where every gap is recorded.
double recorded_between(const ThreadSnapshot& a, const ThreadSnapshot& b);

// What a setting costs: CPU plus its wakes' delay, weighed by wake_weight.
double curve_cost(const IdleCurvePoint& p, const AdviseOptions& o, double wake_s);

// The thread's idle curve over the window: its current setting in its own unit, the others in
// nanoseconds or at the kernel's jiffies.
std::vector<IdleCurvePoint> thread_curve(const ThreadWindow& tw, const Snapshot& to, double window,
                                         bool candidates_ns);

// Whether the thread can be given a setting in nanoseconds: the kernel has IORING_SETUP_IDLE_NS
// (seeds patch 002), known from its BTF whether or not a ring uses it yet.
bool ns_settable(const ThreadSnapshot& b, const Snapshot& to);

// How to ask for a setting in that unit; a ring without IORING_SETUP_IDLE_NS needs the flag.
std::string idle_change(double seconds, const ThreadSnapshot& b, bool ns);

}  // namespace iouscope::advisor
