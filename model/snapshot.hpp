#pragma once
// What one sample of the system looks like once aggregated. The sampler publishes an immutable
// Snapshot; exporters and views only ever read one, so a slow scrape or a slow terminal can
// never hold up sampling.
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/advice.hpp"

namespace iouscope {

// Where a thread's work figure comes from; the split uses the best at hand, in this order.
enum class WorkSource {
    loop_passes,      // deep tier, 6.9+: on-CPU time of the loop passes that served a ring
    kernel,           // sqd->work_time, per thread (6.18+, and kernels with io_sq_cpu_usec)
    submit_and_poll,  // deep tier: time in io_submit_sqes and the thread's io_do_iopoll calls
    estimate,         // derived from sleeps, idle setting and ring progress; see estimate_split()
};

const char* to_string(WorkSource s);

struct LatencyHistogram {
    std::vector<double> upper_bounds_s;     // Prometheus "le" bounds, seconds, ascending
    std::vector<std::uint64_t> cumulative;  // cumulative counts at each bound
    std::uint64_t count = 0;                // all observations (+Inf)
    double sum_s = 0;                       // sum of observations, seconds
};

// The upper bound of the bucket that holds quantile q of the observations, the last finite
// bound where it falls past them (as Prometheus's histogram_quantile), or nullopt without
// observations.
inline std::optional<double> bucket_quantile(const LatencyHistogram& h, double q) {
    if (h.count == 0 || h.upper_bounds_s.empty()) return std::nullopt;
    for (std::size_t i = 0; i < h.cumulative.size() && i < h.upper_bounds_s.size(); ++i)
        if (static_cast<double>(h.cumulative[i]) >= q * static_cast<double>(h.count))
            return h.upper_bounds_s[i];
    return h.upper_bounds_s.back();
}

// Gaps between consecutive SQEs of one SQ thread (deep tier), cumulative since it was first
// seen: the raw material of `iouscope advise`'s idle-time curve. Buckets as IOU_GAP_BUCKETS.
struct WorkGaps {
    std::vector<std::uint64_t> count;   // gaps per bucket
    std::vector<std::uint64_t> sum_ns;  // their total length per bucket
    std::uint64_t sleep_spins = 0;      // sleeps that followed a known last SQE
    double sleep_spin_seconds = 0;      // total spin from the last SQE to those sleeps
    double open_gap_seconds = -1;       // time since its latest SQE at the sample, -1 if none
    // Duty-cycled (GapSampling): the recorded time the counts come from, cumulative; a window's
    // counts scale to it by window / recorded. -1 when every gap is recorded.
    double recorded_seconds = -1;
};

// The work-gap probe's duty cycle where it runs per SQE (collect/gap_duty.hpp): attached for
// on_seconds of every period_seconds, recording from cutoff_seconds into each window.
struct GapSampling {
    double on_seconds = 0, period_seconds = 0, cutoff_seconds = 0;
    double recorded_seconds = 0;        // cumulative recorded time of every window so far
    double attached_seconds = 0;        // cumulative time the windows were open: the cost
    std::uint64_t windows = 0;          // windows opened
    std::uint64_t closed_early = 0;     // windows closed on kEnoughGaps before their on-time
    std::uint64_t attach_failures = 0;  // windows that could not attach
    bool active = false;                // a window is open at the sample
};

// Bounds of gap bucket i in ns: [lower, upper); the last bucket's upper is infinity.
double gap_bucket_lower_ns(std::size_t i);
double gap_bucket_upper_ns(std::size_t i);
// The bucket bpf/iouscope.bpf.c's gap_bucket() puts a gap of `ns` in (for tests and replay).
std::size_t gap_bucket_index(std::uint64_t ns);

struct WakerSnapshot {
    std::uint32_t pid = 0;      // tgid of the waking task, 0 for an interrupt
    std::string comm;           // comm of the waking thread; "irq" for an interrupt
    std::uint64_t wakeups = 0;  // cumulative
    std::string context;        // "task" or "irq": where the wakeup ran
};

// The cgroup v2 a task is in and the container and pod it names (model/container).
struct CgroupLabels {
    std::string cgroup;        // path below the cgroup2 mount; empty if not resolved
    std::string container_id;  // "containerd://<id>" etc., empty outside a container
    std::string pod_uid;       // empty outside a Kubernetes pod
};

// A process that holds a ring or owns an SQ thread, with where it runs: the join target of
// iouscope_process_info.
struct ProcessSnapshot {
    std::uint32_t pid = 0;
    std::string comm;
    CgroupLabels cgroup;
};

struct ThreadSnapshot {
    std::int32_t tid = -1;          // SQ thread tid: the sq_thread label
    std::uint32_t pid = 0;          // the thread's own process (tgid)
    std::string comm;               // that process's comm (group leader)
    CgroupLabels cgroup;            // the thread's own, which can differ from its process's
    double start_time_seconds = 0;  // Unix time the thread started: a reused tid under the same
                                    // labels is another thread when this changes
    double cpu_seconds = 0;         // cumulative on-CPU time since the thread started
    double work_seconds = 0;        // cumulative, see work_source
    double spin_seconds = 0;        // cumulative idle spinning (cpu - work)
    double sleep_seconds = 0;       // cumulative time in idle sleeps since iouscope attached
    WorkSource work_source = WorkSource::estimate;
    // Every source this kernel and tier give, cumulative, side by side: the estimate and the
    // kernel's since the thread started, the deep tier's since iouscope attached.
    std::vector<std::pair<WorkSource, double>> work_by_source_seconds;
    std::uint64_t sleeps = 0;  // idle sleeps (the loop's own, after sq_thread_idle) since attach
    std::uint64_t blocks = 0;  // other voluntary switch-outs since attach: locks, parking, I/O
    double block_seconds = 0;  // cumulative time blocked since attach
    // How the estimate charges spin per idle sleep on this kernel (see docs/ARCHITECTURE.md,
    // "Derived values"): "after_last_work" (5.11+, idle counted from the last work, ticks of
    // 1/HZ), "after_wakeup" (5.10, from the last wakeup: spin is an upper bound), "ns" (seeds
    // patch 002, no tick rounding). Empty while the split is not known (HZ not yet measured).
    std::string spin_model;
    bool split_known = true;    // false until HZ is known for a jiffies idle setting
    std::uint64_t wakeups = 0;  // since attach
    // Of those, wakeups the scheduler gate kept the sched programs from seeing (counted from
    // nvcsw, model/sched_gate.hpp): no waker and no wake latency was recorded for them.
    std::uint64_t untraced_wakeups = 0;
    std::uint64_t voluntary_switches = 0;    // since the thread started (task->nvcsw)
    std::uint64_t involuntary_switches = 0;  // since the thread started (task->nivcsw)
    std::uint32_t state = 0;                 // task __state bits, 0 = running
    std::int32_t sq_cpu = -1;         // sqd->sq_cpu: pinned CPU, or where it last ran; -1 unknown
    bool pinned = false;              // a ring on it asked for IORING_SETUP_SQ_AFF
    double idle_setting_seconds = 0;  // sq_thread_idle
    bool idle_ns_granular = false;    // its setting is in ns: a ring asked IORING_SETUP_IDLE_NS
    // The sqd is its CPU's shared one (seeds patch 000, IORING_SETUP_SQPOLL_PERCPU): it serves
    // rings of any process, so pid and comm are its creator's, not its tenants'.
    bool shared_percpu = false;
    LatencyHistogram wake_latency;
    std::vector<std::uint64_t> wake_latency_log2;  // raw log2 buckets in ns, cumulative
    double wake_p50_seconds = -1;  // wake latency quantiles over the last interval, -1 if none
    double wake_p99_seconds = -1;
    std::size_t rings = 0;
    double fairness = 1;  // Jain's index over rings with demand in the last interval
    double rings_work_seconds =
        -1;  // sum of its rings' sqthread_work_seconds (deep tier), -1 if none
    // Rates over the last interval, for views; Prometheus users derive their own from counters.
    double cpu_util = 0, work_util = 0, spin_util = 0, sleep_util = 0;  // fraction of one CPU
    double sqe_rate = 0, sleep_rate = 0, wakeup_rate = 0, block_rate = 0;
    std::vector<WakerSnapshot> wakers;
    bool has_gaps = false;  // the deep tier's work-gap probe saw this thread submit
    WorkGaps gaps;
    // Loop passes (deep tier, kernels where io_sq_tw can be hooked), cumulative since attach.
    bool has_passes = false;  // the loop-pass probe saw this thread
    std::uint64_t loop_passes = 0;
    std::uint64_t busy_passes = 0;  // passes that served a ring or ran task work
    double pass_work_seconds = 0;   // on-CPU time of the passes that served a ring
    double task_work_seconds = 0;   // the part of it in io_sq_tw: every ring's completions
    double pass_rate = 0;           // passes per second over the last interval
    double empty_pass_ratio = 0;    // passes that did nothing / passes, last interval
};

// io_do_iopoll on one ring by one kind of caller (deep tier).
struct IopollSnapshot {
    std::string caller;             // "sq_thread" or "app"
    std::uint64_t calls = 0;        // cumulative
    std::uint64_t empty = 0;        // calls that reaped nothing
    std::uint64_t completions = 0;  // completions reaped
    double seconds = 0;             // time inside io_do_iopoll
    double calls_rate = 0;          // over the last interval
    double empty_ratio = 0;         // empty / calls over the last interval
    double completions_per_call = 0;
};

// One opcode's requests on one ring on one path (request tier), cumulative over the ring's life
// since iouscope attached. Paths: inline, io-wq, poll (enum iou_req_path).
struct RequestPathSnapshot {
    std::uint64_t completed = 0;  // final CQEs of requests seen submitted
    // By result class (enum iou_req_result): ok, eagain, ecanceled, etime, enobufs, other,
    // untraced (ended without a CQE the probe saw: untimed, not in the latency histogram).
    std::array<std::uint64_t, 7> results{};
    LatencyHistogram latency;  // submission to final CQE
};

struct RequestOpSnapshot {
    std::uint32_t opcode = 0;  // IORING_OP_*; Snapshot::opcode_names names it
    std::uint64_t submitted = 0;
    std::uint64_t punted = 0;         // io-wq queueings
    std::uint64_t punted_forced = 0;  // of them, of requests with IOSQE_ASYNC
    std::uint64_t punted_hashed = 0;  // of them, serialized with their file's hashed work
    // The punts not forced (a batch read can see a forced punt before the punt itself).
    std::uint64_t punted_other() const { return punted - std::min(punted, punted_forced); }
    std::uint64_t poll_armed = 0;  // async poll arms
    std::array<RequestPathSnapshot, 3> paths;
};

// A ring's requests (request tier) and CQ overflow (default tier, 5.19+).
struct RingRequests {
    std::uint64_t stuck = 0;             // in flight longer than --requests.stuck-after
    bool has_requests = false;           // the request tier counts this ring's requests
    bool timed = false;                  // completions and in-flight requests are tracked too
    std::vector<RequestOpSnapshot> ops;  // by opcode, ascending
    std::uint64_t in_flight = 0;         // requests submitted and not completed, at the sample
    double oldest_age_seconds = 0;       // the oldest of them, 0 when none
    std::uint32_t oldest_opcode = 0;
    std::int32_t oldest_fd = -1;
    // io_uring_enter calls on the ring (request tier): how often, SQEs per call, time waiting.
    bool has_enters = false;
    std::uint64_t enters = 0, enter_sqes = 0, enter_waits = 0;
    double enter_wait_seconds = 0;
    // Calls from a thread other than the previous call's: 0 while one thread enters the ring.
    std::uint64_t issuer_switches = 0;
    // Task-work batches run in the calls that waited: the waiter's wake-ups for completions
    // (has_wait_task_work: counted on this kernel, 6.0+).
    bool has_wait_task_work = false;
    std::uint64_t wait_task_work = 0;
    // IPIs sent to make a running thread run its task work, counted on the last ring it used
    // (has_task_work_ipis: counted on this kernel, 6.6+): what COOP_TASKRUN saves.
    bool has_task_work_ipis = false;
    std::uint64_t task_work_ipis = 0;
    // Calls by SQEs submitted: upper bounds 0, 1, 3, 7, ... (IOU_ENTER_BUCKETS), sum = SQEs.
    LatencyHistogram sqes_per_enter;
    bool has_overflow = false;           // the CQ overflow probe is attached
    std::uint64_t overflow_cqes = 0;     // CQEs that took the overflow path
    std::uint64_t overflow_dropped = 0;  // of them, lost (the kernel could not keep them)
};

struct RingSnapshot {
    std::string id;                 // "pid:fd" of the first holder seen; stable for the ring's life
    double start_time_seconds = 0;  // Unix time of the ring's creation, or of the first walk that
                                    // saw it if it predates iouscope
    std::uint64_t ctx = 0;          // kernel address, identity only, never exported
    std::uint32_t pid = 0;
    std::uint32_t fd = 0;
    std::string comm;
    CgroupLabels cgroup;  // of the process holding the ring
    std::string mode;     // sqpoll | iopoll | both | plain
    std::int32_t sq_thread = -1;
    std::uint32_t setup_flags = 0;
    std::uint32_t sq_entries = 0;
    std::uint32_t cq_entries = 0;
    std::uint64_t sqes_total = 0;  // cumulative SQEs consumed since the ring was created
    std::uint64_t cqes_total = 0;  // cumulative CQEs posted since the ring was created
    std::uint32_t sq_backlog = 0;  // SQEs published but not consumed yet; SQ thread rings only
    double sqthread_share = 0;     // share of its SQ thread's SQEs in the last interval
    double sqe_rate = 0, cqe_rate = 0;
    // Backlog seen by successive samples, cumulative, so any two snapshots give the fraction of
    // samples in which the ring had SQEs waiting and their mean.
    std::uint64_t samples = 0, samples_with_backlog = 0, backlog_sum = 0;
    // Deep tier, present when its probes are attached:
    bool has_sqthread_work = false;
    // SQ thread time spent on this ring: its turns in the loop passes where the pass probe is
    // attached (they add up to the thread's pass work), else its time submitting and polling.
    double sqthread_work_seconds = 0;
    double sqthread_submit_seconds = 0;  // of which inside io_submit_sqes
    std::uint64_t sqthread_batches = 0;  // io_submit_sqes calls by the SQ thread
    std::vector<IopollSnapshot> iopoll;
    RingRequests requests;
    // A plain ring without series of its own: counted in its process's FoldedRings instead
    // (model/ring_series.hpp).
    bool folded = false;
    // A light walk passed over it (model/ring_carry.hpp): counts and rates are the last full
    // walk's, and this sample saw nothing of what it did since.
    bool carried = false;
};

// One opcode's requests on folded rings (request tier): submitted, punted by reason, and
// completed by path (inline, io-wq, poll), counted while the rings were folded.
struct FoldedOp {
    std::uint32_t opcode = 0;
    std::uint64_t submitted = 0;
    std::uint64_t punted_forced = 0, punted_other = 0;
    std::array<std::uint64_t, 3> completed{};
    bool operator==(const FoldedOp&) const = default;
};

// The plain rings of one process that have no series of their own (model/ring_series.hpp).
struct FoldedRings {
    std::uint32_t pid = 0;
    std::string comm;
    std::size_t rings = 0;         // folded now
    std::uint64_t sqes_total = 0;  // consumed by its rings while they were folded, cumulative
    std::uint64_t cqes_total = 0;  // posted by them meanwhile
    // Their requests meanwhile, by opcode, ascending (request tier), cumulative.
    std::vector<FoldedOp> requests;
};

// A process's io-wq workers (iou-wrk-* threads; request tier): the live ones by account, and
// since iouscope attached the workers created and exited. Present while the process has a live
// worker or one exited since iouscope attached; gone with the process.
struct IowqSnapshot {
    std::uint32_t pid = 0;
    std::string comm;
    // Live workers: [0] bound, [1] unbound (enum iou_iowq_kind, include/iouscope/requests.h).
    std::array<std::uint32_t, 2> workers{};
    // The largest limit among its io-wqs with a live worker of that account, 0 if none
    // (IORING_REGISTER_IOWQ_MAX_WORKERS sets it per io-wq).
    std::array<std::uint32_t, 2> max_workers{};
    std::uint32_t queues = 0;  // io-wqs (one per submitting thread) with a live worker
    // CPU time of its live workers, whole lives, and of those that exited since iouscope
    // attached: a counter that never goes back while the process lives.
    double cpu_seconds = 0;
    std::uint64_t created = 0;  // workers started since iouscope attached
    std::uint64_t exited = 0;   // workers that exited since iouscope attached
    // Requests of its rings in flight on io-wq, queued or on a worker (request tier, timed
    // kernels: 5.19+), at the sample; -1 where not known.
    std::int64_t requests_in_flight = -1;
};

// NVMe passthrough (uring_cmd) completions of one namespace (deep tier).
struct DeviceSnapshot {
    std::string name;                     // e.g. nvme0n1
    std::uint64_t polled = 0, irq = 0;    // completions by queue type, cumulative
    std::uint64_t polled_intent_irq = 0;  // asked for polling, completed by IRQ
    std::uint64_t polls = 0;              // nvme_ns_chr_uring_cmd_iopoll calls
    LatencyHistogram latency;
    double latency_p50_seconds = -1, latency_p99_seconds = -1;                // last interval
    double completions_rate = 0, polled_ratio = 0, polls_per_completion = 0;  // last interval
    bool iopoll_without_poll_queues = false;  // polled requests completed by IRQ recently
    // Where the io_uring_cmd_done probe is attached: completions handed to io_uring, and the
    // time from end_io to that hand-over (the task-work hop before the CQE).
    bool has_cqes = false;
    std::uint64_t cqes = 0;
    LatencyHistogram cqe_delay;
};

struct ProbeState {
    std::string probe;  // program name without the iou_ prefix
    std::string kind;   // tp_btf, iter, ...
    bool attached = false;
    std::string reason;        // why not; when a lower tier attached, why the higher ones did not
    std::uint64_t missed = 0;  // runs the kernel skipped (recursion_misses), e.g. kprobes in IRQs
    // A module the attached probe waits for: until it loads, the probe could match nothing,
    // so its links are off and it costs nothing (the NVMe tracepoint variant before nvme_core
    // is loaded). Empty when not waiting.
    std::string waiting_for = {};
    // Attached, but detached for now by the scheduler gate: every SQ thread has been running
    // without a voluntary switch for a while, so the program would see nothing of theirs.
    bool gated = false;
};

// How much of what the iterator saw happen a probe saw too. A function that is partially
// inlined (io_submit_sqes was static up to 5.19) attaches and still misses the inlined call
// sites; only a count from elsewhere shows it. Counted over SQPOLL rings, where every SQE the
// ring's head passes was submitted by the SQ thread through io_submit_sqes.
struct ProbeCoverage {
    std::string probe;
    std::uint64_t probe_events = 0;     // cumulative: SQEs the probe saw submitted
    std::uint64_t iterator_events = 0;  // cumulative: SQEs the rings' heads passed meanwhile
    double ratio = -1;                  // probe / iterator over the last interval, -1 when fewer
                                        // than kMinEvents happened in it
    static constexpr std::uint64_t kMinEvents = 100;
};

// A sample: its rings (Snapshot) and everything else (SnapshotHead), apart so that the advisor
// can keep a sample for its window without the rings it never reads (model/advisor.cpp).
struct SnapshotHead {
    std::string hostname;                // where it was taken
    std::string kernel;                  // uname -r of that host
    std::uint64_t seq = 0;               // samples taken so far
    double timestamp = 0;                // Unix time of the sample, seconds
    double monotonic_seconds = 0;        // CLOCK_MONOTONIC of the same instant; 0 if unknown.
                                         // Windows are measured on it: the wall clock can step
    double interval_seconds = 0;         // time since the previous sample
    double sample_duration_seconds = 0;  // time the sample itself took
    unsigned hz = 0;                     // CONFIG_HZ (configured or measured), 0 = not known yet
    bool idle_ns_supported = false;      // the kernel has IORING_SETUP_IDLE_NS (seeds patch 002)
    std::optional<GapSampling> gap_sampling;  // absent: every work gap is recorded (or none)
    std::vector<ThreadSnapshot> threads;
    std::vector<ProcessSnapshot> processes;  // every ring holder and SQ thread owner, by pid
    std::vector<FoldedRings> folded;         // by pid, while the process holds a ring
    std::size_t ring_series_limit = 0;       // plain rings with series of their own; 0 = all
    std::vector<DeviceSnapshot> devices;
    // io_do_iopoll totals over every ring since attach, closed ones included (deep tier).
    std::vector<IopollSnapshot> iopoll_host;
    std::vector<ProbeState> probes;
    // What of the host the daemon sees whole: "tasks" (it runs in the host's PID namespace),
    // "cgroups" (its cgroup2 mount is the whole hierarchy); collect/host_view.
    std::vector<std::pair<std::string, bool>> host_visible;
    std::vector<ProbeCoverage> coverage;  // deep probes cross-checked against the iterator
    std::vector<std::pair<std::string, std::uint64_t>> rings_created_by_mode;      // cumulative
    std::vector<std::pair<std::string, std::uint64_t>> rings_short_lived_by_mode;  // cumulative
    std::vector<std::pair<std::string, std::uint64_t>> map_overflows;              // map -> drops
    std::vector<std::pair<std::string, std::uint64_t>> map_entries;   // map -> entries now
    std::vector<std::pair<std::string, std::uint64_t>> map_capacity;  // map -> max_entries
    std::uint64_t rings_replaced = 0;    // rings that took a closed ring's address, cumulative
    std::uint64_t threads_replaced = 0;  // SQ threads that took an exited one's tid, cumulative
    std::uint64_t walks_incomplete = 0;  // ring walks that ended before the task list did
    std::uint64_t walks_light = 0;       // walks that passed over known plain rings, cumulative
    std::uint64_t rings_carried = 0;     // plain rings this sample carried from an earlier walk
    // The kernel's IORING_OP_* names by value (from its BTF enum io_uring_op), set by the
    // sampler; an opcode past its end is named by number.
    std::shared_ptr<const std::vector<std::string>> opcode_names;
    std::uint64_t requests_unmatched = 0;  // final CQEs of requests not seen submitted
    bool iowq_probe = false;               // io-wq workers are walked (request tier)
    std::vector<IowqSnapshot> iowq;        // by pid
    Advice advice;  // the advisor's findings over the daemon's window (set by the sampler)
};

struct Snapshot : SnapshotHead {
    std::vector<RingSnapshot> rings;  // by ctx
};

// Opcode `op` as the kernel names it (SnapshotHead::opcode_names: IORING_OP_* lowercased), or
// "op<N>" past its names: the one spelling of the op label, the advisor's findings and top.
inline std::string opcode_name(const SnapshotHead& s, std::uint32_t op) {
    if (s.opcode_names && op < s.opcode_names->size() && !(*s.opcode_names)[op].empty())
        return (*s.opcode_names)[op];
    return "op" + std::to_string(op);
}

}  // namespace iouscope
