#pragma once
// The scheduler gate. sched_switch and sched_waking run on every context switch and every wakeup
// of every task on the machine, to follow the few that are SQ threads'. An SQ thread that never
// sleeps gives them nothing to follow, and the iterator already reads its voluntary switch count
// (nvcsw) and state at every walk. So once every live SQ thread has been running, without a
// voluntary switch, for 5 s of walks in a row, the gate detaches the two programs; the first
// walk that finds a count moved, a thread not running or a thread it has not seen attaches them
// again. The workload the default tier costs most (a busy SQ thread beside a submitter that waits
// for completions) then pays nothing for them.
//
// Lazy (--probes.sched-gate=lazy; the default where no CPU is nohz_full, auto_gate_is_lazy)
// also keeps them detached while there is no SQ thread, and while the only threads not yet quiet
// are new ones that run: a thread is followed from the walk after the first that finds it slept
// (its count moved, or it was not running). A machine with no SQ thread, or with threads that poll
// from their birth, then pays nothing at all. The price: the sleeps of a thread's first interval or
// two come from the counts below, without wakers or wake latency, and every voluntary switch a new
// thread took before the walk that first saw it (a block in its setup as well as a sleep) counts as
// a sleep there. It is the default because the gate that is not lazy (on) costs every busy machine
// on every context switch while there is no SQ thread, and a fresh ring's thread keeps it attached
// for 5 s.
//
// What the programs did not see while detached is accounted from the kernel's counts
// (account_untraced): the voluntary switches become sleeps, and the time the thread was off its
// CPU in those intervals becomes sleep time. A sleep that began while they were detached and is
// still going at the walk that attaches them is followed by the same off-CPU arithmetic until
// the thread runs again. Blocks cannot be told from sleeps there, nor a preempted thread's wait
// in the run queue from sleep in an interval that also had a voluntary switch.
#include <cstdint>
#include <string_view>
#include <vector>

namespace iouscope {

// One live SQ thread as one walk and the sched maps saw it.
struct GateThread {
    // New at this walk, back after a walk that missed it, or with a voluntary switch (nvcsw)
    // since the last walk: a thread first seen may have slept already.
    bool switched = true;
    bool running = false;        // TASK_RUNNING at the walk
    bool sleep_open = false;     // asleep or blocked in a sleep whose start a program saw
    bool untraced_open = false;  // asleep in a sleep that began while the programs were detached
    bool fresh = false;          // new at this walk: switched, but maybe only by its setup
};

class SchedGate {
public:
    SchedGate() = default;
    // Lazy: closed from the start, and closed at once by a walk with no SQ thread; new threads
    // that run do not open it.
    explicit SchedGate(bool lazy) : lazy_(lazy), closed_(lazy) {}

    // How long every thread must stay quiet, over at least kQuietWalks walks, before the gate
    // closes. A thread that sleeps every few seconds keeps it open, and its sleeps exact.
    static constexpr std::uint64_t kQuietNs = 5'000'000'000ull;
    static constexpr int kQuietWalks = 3;

    // Takes one walk's threads, at its instant now_ns; returns whether the programs should be
    // detached after it. An incomplete walk keeps (or makes) the gate open, and so does one with
    // no SQ thread unless lazy: a new thread's first sleep comes within its idle time, before any
    // walk could see it.
    bool observe(const std::vector<GateThread>& threads, bool walk_complete, std::uint64_t now_ns);
    bool closed() const { return closed_; }

private:
    bool quiet(const GateThread& t) const;
    bool lazy_ = false;
    bool closed_ = false;
    int quiet_ = 0;                  // quiet walks in a row
    std::uint64_t quiet_since_ = 0;  // the first of them
};

// Whether the default gate (--probes.sched-gate=auto) is lazy, given the text of
// /sys/devices/system/cpu/nohz_full (empty where the file is absent; "(null)" or an empty line
// where no CPU is nohz_full). The lazy gate never sees the switch-in of a thread that polls from
// its birth, and without that note a thread alone on a nohz_full CPU is charged only at the
// scheduler's remote tick, once a second: 0.5 s intervals then read 0.3 to 1.5 CPUs.
bool auto_gate_is_lazy(std::string_view nohz_full);

// What the sched programs did not see of one thread, from the kernel's counts.
struct UntracedSleeps {
    std::uint64_t sleeps = 0;    // voluntary switches no program saw (sleeps and blocks alike)
    std::uint64_t wakeups = 0;   // wakeups of those that ended while the programs were detached
    std::uint64_t sleep_ns = 0;  // time off the CPU in the intervals that had them
    bool open = false;           // asleep at the last walk in a sleep whose start no program saw
};

// One thread over one interval between walks.
struct GateInterval {
    bool traced = false;                // the programs were attached over the whole interval
    std::uint64_t wall_ns = 0;          // the interval
    std::uint64_t cpu_ns = 0;           // the thread's CPU time in it
    std::uint64_t nvcsw = 0;            // its voluntary switches in it, by the kernel's count
    std::uint64_t traced_switches = 0;  // sleeps and blocks the programs counted in it
    std::uint64_t traced_off_ns = 0;    // sleep, block and wake-latency time they counted in it
    bool asleep = false;                // not running at the walk that ends it
    bool traced_sleep_open = false;     // the programs have a sleep or block open at that walk
};

// Adds to u what the programs missed in the interval. Nothing where they were attached all along
// and no untraced sleep was open.
void account_untraced(UntracedSleeps& u, const GateInterval& in);

}  // namespace iouscope
