#pragma once
// What the advisor's findings share (model/advisor_window.cpp): one SQ thread's window between
// two snapshots, the `from` snapshot indexed, the idle curve of one thread, and the wording of
// figures. Internal to the advisor's files (model/advisor*.cpp).
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/advisor.hpp"

namespace iouscope::advisor {

std::string fmt_seconds(double s);
// A sq_thread_idle setting in its unit: nanoseconds or milliseconds.
std::string fmt_setting(double s, bool ns_granular);

// The `from` snapshot indexed once, so judging thousands of rings stays linear. The
// aggregator's snapshots list threads by tid and rings by ctx already: those are searched as
// they are, and only a snapshot in another order (one read back from JSON, a test's) is sorted,
// by position so that the first of a repeated key wins. The rings are looked at only once a
// ring is asked for: a host without SQ threads asks for none.
class FromIndex {
public:
    explicit FromIndex(const Snapshot& s);
    const ThreadSnapshot* thread(std::int32_t tid) const;
    // A ctx address can be reused by a new ring; the id tells them apart.
    const RingSnapshot* ring(const RingSnapshot& now) const;
    // Finds the rings of `now` (listed by ctx) in one walk through this snapshot's, for ring()
    // to answer from: a thousand SQ threads' rings, searched one by one, would each take half a
    // dozen cache misses in a snapshot last read a window ago, where the walk streams through
    // it. Fewer than one in 64 of its rings are left to be searched one by one.
    void match(std::span<const RingSnapshot* const> now) const;

private:
    const std::vector<std::uint32_t>& ring_order() const;
    const Snapshot& s_;
    std::vector<std::uint32_t> threads_;  // positions by key; empty when in order
    mutable std::optional<std::vector<std::uint32_t>> rings_;
    mutable std::unordered_map<const RingSnapshot*, const RingSnapshot*> matched_;
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

// A finding about `subject`, labelled with its owner process and that process's container.
Finding owned_finding(const char* id, std::string subject, std::uint32_t pid,
                      const std::string& comm, const CgroupLabels& cgroup);
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
