#pragma once
// Turns raw BPF readings into a Snapshot: wraps 32-bit counters into totals, keeps counters
// monotonic, derives the CPU split, shares and fairness, and notices what came and went.
// Pure logic: the unit tests feed it hand-made RawSamples. update() is in model/aggregator.cpp,
// its stages in model/aggregator_*.cpp: rings, threads, cpu_split, sched, loop, lifecycle and
// devices.
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/uninit_allocator.hpp"
#include "iouscope/records.h"
#include "iouscope/requests.h"
#include "model/counters.hpp"
#include "model/kernel_traits.hpp"
#include "model/sched_gate.hpp"
#include "model/snapshot.hpp"

namespace iouscope {

using RingRecords = std::vector<iou_ring_record, UninitAllocator<iou_ring_record>>;

// A ring's requests in flight (request tier), summed from req_inflight by collect/requests.cpp.
struct RingInFlight {
    std::uint64_t ctx = 0, born_ns = 0;  // the ring, as iou_req_key names it
    std::uint64_t requests = 0;          // in flight at the read
    std::uint64_t oldest_start_ns = 0;   // the oldest's submission, bpf_ktime_get_ns()
    std::uint32_t oldest_opcode = 0;
    std::int32_t oldest_fd = -1;  // its SQE's fd where the kernel keeps it (6.1+), else -1
    std::uint64_t stuck = 0;      // in flight longer than --requests.stuck-after
    std::uint64_t on_iowq = 0;    // of them, punted to io-wq: queued or on a worker
};

// The request tier's and the CQ overflow probe's reads, of live rings only: collect/requests.cpp
// deletes the entries of rings that are gone before it hands them over.
struct RequestSample {
    bool overflow_probe = false;  // io_uring_cqe_overflow is attached
    bool on = false;              // the request tier is attached (req_submit at least)
    bool timed = false;           // req_complete is attached: completions and latency
    std::vector<std::pair<iou_req_key, iou_req_stats>> stats;
    std::vector<RingInFlight> in_flight;
    std::size_t inflight_entries = 0;  // req_inflight's entries, done ones included
    std::vector<std::pair<std::uint64_t, iou_ring_overflow>> overflow;  // by ctx
    bool enter_probe = false;                                           // io_uring_enter is traced
    bool wait_task_work_probe = false;  // task work in those calls is counted (wait_task_work)
    bool task_work_ipis_probe = false;  // task_work_add's IPIs are counted (task_work_ipis)
    std::vector<std::pair<iou_req_key, iou_ring_enters>> enters;
    bool iowq_probe = false;          // io-wq workers are walked (iowq_workers)
    std::uint64_t iowq_since_ns = 0;  // workers started since were created while we watched
    // Read in this order: a worker that exits between the two reads is in neither, never in
    // both (the aggregator keeps the counters from going back meanwhile).
    std::vector<std::pair<iou_iowq_proc_key, iou_iowq_exits>> iowq_exits;
    std::vector<iou_iowq_worker> workers;
    iou_req_counters counters{};
};

struct RawSample {
    std::uint64_t mono_ns = 0;  // CLOCK_MONOTONIC at the walk, the clock of bpf_ktime_get_ns()
    double unix_time = 0;
    // The walk's records, read straight into (collect/bpf_maps.cpp): growing it leaves the room
    // unwritten for the read to fill; zeroing it was 1.4 % of the daemon at 10,000 rings.
    RingRecords rings;
    std::vector<std::pair<std::uint32_t, iou_sched_state>> sched;
    std::vector<std::pair<iou_waker_key, iou_waker_val>> wakers;
    std::vector<iou_created_ring> created;  // drained from the map before the walk
    // The walk reached the end of the task list. An incomplete walk (an error or signal midway)
    // expires nothing: the rings it did not reach are not known to be gone.
    bool walk_complete = true;
    // The walk passed over the plain rings it knew (model/ring_carry.hpp), and the last `carried`
    // records of rings are theirs, carried from an earlier walk: their counts are as they were.
    bool light_walk = false;
    std::size_t carried = 0;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> births;  // ring_births: ctx -> born_ns
    iou_stats stats{};
    KernelTraits kernel;  // collect/kernel_features, the same for every sample
    // cgroup v2 id -> path below the cgroup2 mount, for the walk's ids that collect/cgroups
    // could resolve; empty on a cgroup v1-only host.
    std::unordered_map<std::uint64_t, std::string> cgroup_paths;
    // Deep tier (empty when off).
    std::vector<std::pair<std::uint64_t, iou_ring_work>> ring_work;
    std::vector<std::pair<iou_iopoll_key, iou_iopoll_stats>> iopoll;
    std::vector<std::pair<iou_dev_key, iou_nvme_stats>> nvme;
    std::vector<std::pair<std::uint32_t, iou_work_gaps>> gaps;    // by SQ thread tid
    std::vector<std::pair<std::uint32_t, iou_sq_passes>> passes;  // by SQ thread tid
    RequestSample requests;
    // The loop-pass probe is attached, so a ring's SQ thread work is its turn time (which adds up
    // to the thread's pass work) rather than its time in io_submit_sqes and io_do_iopoll.
    bool ring_turns = false;
    bool cmd_done = false;      // the io_uring_cmd_done probe is attached: devices have CQE counts
    bool submit_probe = false;  // io_submit_sqes is attached: ring_work counts SQ thread SQEs
    std::optional<GapSampling> gap_sampling;  // the gap probe's duty cycle at mono_ns, if any
    // The scheduler gate had sched_switch and sched_waking detached for some of the interval
    // since the previous walk: what they did not see comes from the kernel's counts.
    bool sched_untraced = false;
};

std::string ring_mode(std::uint32_t setup_flags);
// Neither SQPOLL nor IOPOLL: a ring whose counts are all there is to read of it.
inline bool plain_ring(std::uint32_t setup_flags) {
    return (setup_flags & (IOU_SETUP_SQPOLL | IOU_SETUP_IOPOLL)) == 0;
}

// The cgroup, container and pod of a walked cgroup id; empty where the id has no path.
CgroupLabels cgroup_labels(const RawSample& raw, std::uint64_t id);

// Every process that holds a ring or owns an SQ thread, once, by pid.
std::vector<ProcessSnapshot> processes_of(const Snapshot& snap);

// A measured tick rate snapped to the CONFIG_HZ it is within 1 % of; 0 if none is that close.
unsigned snap_hz(double measured);

// How the estimate charges spin to each idle sleep of an SQ thread, from what the walk saw of
// its loop (see ThreadSnapshot::spin_model). Not known while a jiffies idle has no HZ.
struct SpinModel {
    std::string name;
    std::uint64_t spin_per_sleep_ns = 0;
    bool known = false;
};
SpinModel spin_model(const iou_ring_record& r, unsigned hz);

// BPF map entries whose owner is gone, for the sampler to delete after an update. Each list is
// built in one pass over what the sample read, so a sample costs what is alive plus what changed.
struct MapCleanup {
    std::vector<std::uint32_t> threads;  // sched_state, work_gaps, sq_passes keys
    std::vector<iou_waker_key> wakers;   // waker pairs of threads that are gone or replaced
    std::vector<std::uint64_t> rings;    // ctx keys of ring_births, ring_work, iopoll_stats
    bool empty() const { return threads.empty() && wakers.empty() && rings.empty(); }
};

// A process by tgid and group leader start (iou_iowq_proc_key), and the io-wq counters last
// reported for it (model/aggregator_iowq.cpp).
using IowqProcKey = std::pair<std::uint32_t, std::uint64_t>;
struct IowqFloor {
    std::uint64_t cpu_ns = 0, created = 0, exited = 0;
};

class Aggregator {
public:
    // Threads missing from this many consecutive samples are forgotten, and their BPF state is
    // reported in cleanup() for the sampler to delete.
    static constexpr int kExpireAfter = 3;

    Aggregator();
    ~Aggregator();
    Aggregator(Aggregator&&) noexcept;
    Aggregator& operator=(Aggregator&&) noexcept;

    Snapshot update(const RawSample& raw);

    // CONFIG_HZ, to turn sq_thread_idle jiffies into seconds. 0 = unknown: it is then measured
    // from the jiffies and clock of two consecutive walks.
    void set_hz(unsigned hz) { hz_ = hz; }
    unsigned hz() const { return hz_; }

    // What the last update found gone, for the sampler to delete from the BPF maps: threads
    // that expired, waker pairs of gone or replaced threads, and ring addresses of rings that
    // closed or that no walk ever saw (closed within a sample) once two walks missed them.
    const MapCleanup& cleanup() const { return cleanup_; }

    // A device stays flagged as "IOPOLL without poll queues" this long after the last polled
    // request that an interrupt completed.
    static constexpr std::uint64_t kPollQueueFlagHoldNs = 60'000'000'000ull;

    // The SQ threads the last update saw, as the scheduler gate reads them.
    std::vector<GateThread> gate_threads() const;

    // A RawSample to read the next sample into: empty, but its vectors keep the capacity of the
    // one last handed back to recycle(). The records of 10,000 rings are 2.2 MB, which a steady
    // sampler then reads without allocating, growing or copying.
    RawSample take_raw();
    void recycle(RawSample&& raw) { spare_ = std::move(raw); }

private:
    struct RingState {
        std::string id;
        std::uint64_t born_ns = 0;   // from the record; with ctx, the ring's identity
        double start_time_unix = 0;  // its birth, or first sight if it predates iouscope
        WrappingCounter32 sqes, cqes;
        std::uint64_t prev_sqes = 0, prev_cqes = 0;
        // The last record a walk read rather than carried (model/ring_carry.hpp): its sample's
        // instant and counts, and the rates since the one before, which carried records keep.
        std::uint64_t read_mono_ns = 0, read_sqes = 0, read_cqes = 0;
        double sqe_rate = 0, cqe_rate = 0;
        struct {
            bool has_sqthread_work = false;
            double sqthread_work_seconds = 0, sqthread_submit_seconds = 0;
            std::uint64_t sqthread_batches = 0;
            std::vector<IopollSnapshot> iopoll;
        } deep;  // the deep tier's figures at that read
        std::uint64_t samples = 0, samples_with_backlog = 0, backlog_sum = 0;
        std::map<std::uint32_t, iou_iopoll_stats> prev_iopoll;  // by caller
        std::uint64_t prev_deep_work_ns = 0;  // io_submit_sqes + SQ-thread io_do_iopoll time
        std::uint64_t prev_probe_sqes = 0;    // ring_work.sqes at the last sample (0: no entry)
        // The holder's comm as the record had it, and as a string: read again only when the
        // bytes change (a prctl(PR_SET_NAME) of the group leader, or another holder).
        char comm_raw[IOU_COMM_LEN] = {};
        std::string comm;
        bool seen_before = false;
    };
    struct DeviceState {
        iou_nvme_stats prev{};
        bool seen_before = false;
        std::uint64_t last_intent_irq_ns = 0;
    };
    struct ThreadState {
        std::uint64_t start_ns = 0;  // the thread's start_time: with the tid, its identity
        double start_time_unix = 0;  // the same in Unix time, converted once
        std::uint32_t pid = 0;
        std::string comm;
        std::uint64_t prev_cpu_ns = 0, prev_work_ns = 0, prev_sleep_ns = 0;
        std::uint64_t prev_sleeps = 0, prev_wakeups = 0, prev_blocks = 0;
        std::uint64_t prev_nvcsw = 0;  // the kernel's voluntary switches at the last sample
        std::uint64_t block_ns = 0;
        bool split_started = false;          // work/spin hold the thread's history split
        bool estimate_started = false;       // estimate_work_ns holds the estimate's history split
        std::uint64_t estimate_work_ns = 0;  // the estimate, kept beside whichever source rules
        std::uint64_t submit_poll_work_ns = 0;  // its rings' deep submit+poll time since seen
        std::uint64_t prev_pass_work_ns = 0;
        std::uint64_t prev_passes = 0, prev_busy_passes = 0;
        // The kernel's work_time can start after the split did (seeds patch 004 turns it on
        // with the first ring that asks): work then continues from the split so far, offset by
        // where work_time stood at the switch, instead of waiting for work_time to overtake it.
        std::uint64_t prev_work_time_ns = 0;
        std::int64_t kernel_offset_ns = 0;
        bool prev_kernel = false;
        std::uint64_t work_ns = 0, spin_ns = 0, sleep_ns = 0;
        std::vector<std::uint64_t> prev_lat_hist;
        // What the scheduler gate kept the sched programs from seeing, and what they had
        // counted at the last walk (sleeps + blocks; sleep, block and wake-latency time).
        UntracedSleeps untraced;
        std::uint64_t prev_traced_switches = 0, prev_traced_off_ns = 0, prev_seen_ns = 0;
        bool running = false, sleep_open = false;  // at the last walk
        bool switched = true;                      // GateThread::switched at the last walk
        bool fresh = true;                         // GateThread::fresh at the last walk
        bool seen_before = false;
        int missing = 0;
    };

    // Each ring's state by ctx, ascending: the addresses apart, so that telling whether rings
    // came or went reads 8 bytes a ring. The *_next_ are end_ring_lives' merge, kept for their
    // capacity.
    std::vector<std::uint64_t> ring_ctx_, ring_ctx_next_;
    std::vector<RingState> ring_states_, ring_states_next_;
    std::map<std::uint32_t, ThreadState> threads_;  // by tid
    std::map<std::string, std::uint64_t> created_by_mode_, short_lived_by_mode_;
    std::map<std::string, DeviceState> devices_;
    // io_do_iopoll totals of rings that were closed, by caller, so host totals never go back.
    std::map<std::uint32_t, iou_iopoll_stats> retired_iopoll_;
    MapCleanup cleanup_;
    // Keys found in BPF maps without a live owner at the last update; deleted if the next update
    // finds them orphaned again (one sample's grace for an owner created after the walk).
    std::set<std::uint64_t> orphan_rings_;
    std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> orphan_wakers_;
    std::uint64_t rings_replaced_ = 0, walks_incomplete_ = 0, threads_replaced_ = 0;
    std::uint64_t walks_light_ = 0;
    ProbeCoverage submit_coverage_{"io_submit_sqes"};
    std::map<IowqProcKey, IowqFloor> iowq_floor_;  // model/aggregator_iowq.cpp

    // The stages of update() (model/aggregator*.cpp, one file per concern), each a function of
    // what one update read. The unit tests reach the stages that take all they use as arguments
    // through AggregatorStages.
    friend class AggregatorStages;
    struct RingDelta {
        std::uint64_t sqes = 0, cqes = 0;
        std::uint64_t deep_work_ns = 0;  // io_submit_sqes + SQ-thread io_do_iopoll time
    };
    using Members = std::span<const std::pair<std::size_t, RingDelta>>;
    struct SampleIndex;
    struct UpdateContext;
    struct MemberTotals {
        std::uint64_t sqes = 0, cqes = 0, deep_work_ns = 0, sqes_total = 0;
        bool pinned = false;
    };
    void measure_hz(const RawSample& raw);
    void observe_rings(UpdateContext& cx, std::vector<RingSnapshot>& rings);
    RingDelta observe_ring(UpdateContext& cx, std::uint64_t ctx, const iou_ring_record& rec,
                           RingState& st, RingSnapshot& rs);
    void ring_counters(const UpdateContext& cx, std::uint64_t ctx, const iou_ring_record& rec,
                       RingState& st, RingDelta& d, RingSnapshot& rs);
    static void ring_rates(const UpdateContext& cx, RingState& st, RingSnapshot& rs);
    std::uint64_t ring_iopoll(UpdateContext& cx, std::uint64_t ctx, RingState& st,
                              RingSnapshot& rs);
    void ring_deep_work(UpdateContext& cx, std::uint64_t ctx, const iou_ring_record& rec,
                        RingState& st, RingDelta& d, std::uint64_t sq_poll_ns, RingSnapshot& rs);
    ThreadSnapshot observe_thread(UpdateContext& cx, std::int32_t tid, Members members,
                                  std::vector<RingSnapshot>& rings);
    ThreadState& thread_identity(const RawSample& raw, std::int32_t tid, const iou_ring_record& rec,
                                 const RingSnapshot& first_ring);
    ThreadSnapshot thread_basics(std::int32_t tid, const iou_ring_record& rec,
                                 const ThreadState& st, std::size_t rings) const;
    void split_thread_cpu(const RawSample& raw, const iou_ring_record& rec, ThreadState& st,
                          const MemberTotals& m, const iou_sq_passes* passes, std::uint64_t cpu_ns,
                          ThreadSnapshot& ts);
    static void kernel_split(ThreadState& st, std::uint64_t cpu_ns, std::uint64_t work_time_ns);
    static CpuSplit advance_estimate(ThreadState& st, const SpinModel& model, const MemberTotals& m,
                                     std::uint64_t cpu_ns, std::uint64_t dcpu,
                                     std::uint64_t sleeps);
    static void thread_rates(double interval, const ThreadState& st, std::uint64_t cpu_ns,
                             std::uint64_t prev_sleep_total, bool split_was_started,
                             std::uint64_t dsqes, ThreadSnapshot& ts);
    static void thread_wake_latency(const iou_sched_state& ss, ThreadState& st, ThreadSnapshot& ts);
    static void note_untraced(const UpdateContext& cx, const iou_ring_record& rec,
                              const iou_sched_state* ss, std::uint64_t cpu_ns,
                              std::uint64_t asleep_ns, ThreadState& st);
    static void shares_and_fairness(Members members, std::uint64_t dsqes,
                                    std::vector<RingSnapshot>& rings, ThreadSnapshot& ts);
    static void thread_gaps(const iou_work_gaps& g, const RawSample& raw, ThreadSnapshot& ts);
    static void thread_passes(const iou_sq_passes& p, double interval, ThreadState& st,
                              ThreadSnapshot& ts);
    void expire_threads(const UpdateContext& cx);
    static IopollSnapshot iopoll_snapshot(std::uint32_t caller, const iou_iopoll_stats& v);
    DeviceSnapshot observe_device(const UpdateContext& cx, const iou_dev_key& key,
                                  const iou_nvme_stats& n);
    void finish(const UpdateContext& cx, Snapshot& snap);

    void count_created(const UpdateContext& cx);
    std::vector<std::uint64_t> end_ring_lives(const UpdateContext& cx);
    void renew_if_replaced(RingState& st, const iou_ring_record& rec);
    bool replaced_by(const RingState& st, const iou_ring_record& rec) const;
    void retire_iopoll(const RingState& st);
    void plan_ring_cleanup(const UpdateContext& cx, const std::vector<std::uint64_t>& gone);
    void plan_waker_cleanup(const RawSample& raw);
    std::uint64_t thread_cpu_ns(const iou_ring_record& rec, const ThreadState& st,
                                std::uint64_t at_ns) const;

    // What one update indexes of its raw sample, in sorted vectors that stay from one sample to
    // the next so that a steady sample allocates nothing for them (model/aggregator_index.cpp).
    std::unique_ptr<SampleIndex> ix_;
    // Each walked cgroup's labels, derived again only when its path changes.
    struct CgroupEntry {
        std::string path;
        CgroupLabels labels;
    };
    std::unordered_map<std::uint64_t, CgroupEntry> cgroups_;
    // The last labels_of() answer, until the next sync_cgroups().
    std::uint64_t last_cgroup_id_ = 0;
    const CgroupLabels* last_labels_ = nullptr;
    void sync_cgroups(const RawSample& raw);
    const CgroupLabels& labels_of(std::uint64_t cgroup_id);

    RawSample spare_;  // recycle()'s, for take_raw()
    std::uint64_t seq_ = 0;
    unsigned hz_ = 0;
    std::uint64_t hz_jiffies_ = 0, hz_mono_ns_ = 0;
    std::uint64_t prev_mono_ns_ = 0;
};

}  // namespace iouscope
