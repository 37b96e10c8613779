#include "model/sched_gate.hpp"

#include <algorithm>

namespace iouscope {

bool SchedGate::quiet(const GateThread& t) const {
    const bool switched = t.switched && !(lazy_ && t.fresh);
    return !switched && t.running && !t.sleep_open && !t.untraced_open;
}

bool SchedGate::observe(const std::vector<GateThread>& threads, bool walk_complete,
                        std::uint64_t now_ns) {
    const bool quiet = walk_complete && (lazy_ || !threads.empty()) &&
                       std::all_of(threads.begin(), threads.end(),
                                   [this](const GateThread& t) { return this->quiet(t); });
    if (!quiet) quiet_ = 0;
    if (quiet && quiet_++ == 0) quiet_since_ = now_ns;
    // Lazy, with no thread to follow: nothing to wait for.
    if (lazy_ && quiet && threads.empty()) return closed_ = true;
    // Closed, it opens at the first walk that is not quiet; open, it closes after enough.
    closed_ = closed_ ? quiet : quiet_ >= kQuietWalks && now_ns - quiet_since_ >= kQuietNs;
    return closed_;
}

bool auto_gate_is_lazy(std::string_view nohz_full) {
    return std::none_of(nohz_full.begin(), nohz_full.end(),
                        [](char c) { return c >= '0' && c <= '9'; });
}

void account_untraced(UntracedSleeps& u, const GateInterval& in) {
    if (in.traced && !u.open) return;
    const std::uint64_t missed = in.nvcsw > in.traced_switches ? in.nvcsw - in.traced_switches : 0;
    // Off the CPU with no voluntary switch: preempted, waiting in the run queue, not asleep.
    if (missed == 0 && !u.open) return;
    const std::uint64_t off = in.wall_ns > in.cpu_ns ? in.wall_ns - in.cpu_ns : 0;
    u.sleep_ns += off > in.traced_off_ns ? off - in.traced_off_ns : 0;
    u.sleeps += missed;
    const bool open = in.asleep && !in.traced_sleep_open;
    // The sleep still open ends later, in a wakeup the programs, attached again, will count.
    if (!in.traced) u.wakeups += missed - (open && missed > 0 ? 1 : 0);
    u.open = open;
}

}  // namespace iouscope
