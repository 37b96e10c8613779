#include "exporters/metric_catalog.hpp"

#include <iterator>
#include <stdexcept>

namespace iouscope {

namespace {

using Labels = std::vector<std::string_view>;

Labels with(Labels base, std::initializer_list<std::string_view> more) {
    base.insert(base.end(), more);
    return base;
}

// The labels that name an SQ thread and a ring, as exporters/prometheus_exporter.cpp's
// thread_labels() and ring_labels() give them.
const Labels kThread = {"sq_thread", "pid", "comm", "shared"};
const Labels kRing = {"ring", "pid", "comm", "mode", "sq_thread"};

// clang-format off

// The SQ threads' families: CPU split, sleeps and wakes, identity, loop passes.
std::vector<MetricDecl> thread_metrics() {
    return {
        {"iouscope_sqthread_cpu_seconds_total", MetricKind::counter, "thread_cpu", kThread,
         "CPU time used by the SQ thread since it started."},
        {"iouscope_sqthread_work_seconds_total", MetricKind::counter, "thread_cpu", kThread,
         "SQ thread CPU time spent doing work (submitting, reaping, task work); see iouscope_sqthread_work_time_source."},
        {"iouscope_sqthread_spin_seconds_total", MetricKind::counter, "thread_cpu", kThread,
         "SQ thread CPU time spent polling idle rings: CPU minus work."},
        {"iouscope_sqthread_sleep_seconds_total", MetricKind::counter, "thread_cpu", kThread,
         "Time the SQ thread spent in idle sleeps since iouscope attached."},
        {"iouscope_sqthread_blocks_total", MetricKind::counter, "thread_cpu", kThread,
         "Times the SQ thread blocked other than in its idle sleep since iouscope attached: waits on sqd->lock, parking (ring exit, io-wq registration), I/O a submission waited for. They charge no idle spin."},
        {"iouscope_sqthread_blocked_seconds_total", MetricKind::counter, "thread_cpu", kThread,
         "Time the SQ thread spent blocked (see iouscope_sqthread_blocks_total)."},
        {"iouscope_sqthread_spin_model", MetricKind::gauge, "thread_cpu", with(kThread, {"model"}),
         "1 for how the estimate charges spin to each idle sleep on this kernel: after_last_work (5.11+: sq_thread_idle plus half a tick after the last work), after_wakeup (5.10: counted from the wakeup, an upper bound), ns (nanosecond idle, no tick). Absent while HZ is being measured."},
        {"iouscope_sqthread_work_time_source", MetricKind::gauge, "thread_cpu", with(kThread, {"source"}),
         "1 for the source of the work/spin split, the best this kernel and tier give: loop_passes (deep tier, 6.9+: the loop passes that served a ring, timed), kernel (per-thread sqd->work_time, tick-sampled), submit_and_poll (deep tier: io_submit_sqes and io_do_iopoll time), estimate."},
        {"iouscope_sqthread_work_by_source_seconds_total", MetricKind::counter, "thread_cpu", with(kThread, {"source"}),
         "SQ thread work as each available source counts it, side by side (see iouscope_sqthread_work_time_source): the estimate and kernel since the thread started, the deep tier's since iouscope attached. Compare rates."},
        {"iouscope_sqthread_sleeps_total", MetricKind::counter, "thread_wake", kThread,
         "Idle sleeps of the SQ thread since iouscope attached: its loop found no work for sq_thread_idle and slept until woken."},
        {"iouscope_sqthread_wakeups_total", MetricKind::counter, "thread_wake", kThread,
         "Times the SQ thread was woken since iouscope attached."},
        {"iouscope_sqthread_untraced_wakeups_total", MetricKind::counter, "thread_wake", kThread,
         "Of iouscope_sqthread_wakeups_total, the wakeups that ended while the scheduler gate (--probes.sched-gate) had sched_switch and sched_waking detached: counted from the thread's voluntary switches, with no waker and no wake latency recorded. The by-waker counts and the wake latency histogram cover the wakeups less these."},
        {"iouscope_sqthread_voluntary_switches_total", MetricKind::counter, "thread_wake", kThread,
         "Voluntary context switches of the SQ thread since it started."},
        {"iouscope_sqthread_involuntary_switches_total", MetricKind::counter, "thread_wake", kThread,
         "Involuntary context switches (preemptions) of the SQ thread since it started."},
        {"iouscope_sqthread_wakeups_by_waker_total", MetricKind::counter, "thread_wake", with(kThread, {"waker_pid", "waker_comm", "waker_context"}),
         "Wakeups of the SQ thread by the waking process, or by an interrupt (waker_context=\"irq\", waker_pid=\"0\"): a completion's task work, a timeout."},
        {"iouscope_sqthread_wakeup_latency_seconds", MetricKind::histogram, "thread_wake", kThread,
         "Time from the SQ thread's wakeup (sched_waking, in the waker) until it ran on a CPU."},
        {"iouscope_sqthread_rings", MetricKind::gauge, "thread_info", kThread,
         "Rings served by the SQ thread."},
        {"iouscope_sqthread_fairness", MetricKind::gauge, "thread_info", kThread,
         "Jain's fairness index of SQEs served among the thread's rings that had demand in the last sample interval (1 = equal, 1/n = one ring took all)."},
        {"iouscope_sqthread_start_time_seconds", MetricKind::gauge, "thread_info", kThread,
         "Unix time the SQ thread started. A tid is reused once its thread exits: when this changes under the same labels, the counters restart from the new thread's own (a counter reset, never a jump)."},
        {"iouscope_sqthread_idle_setting_seconds", MetricKind::gauge, "thread_info", kThread,
         "sq_thread_idle: how long the thread polls idle rings before sleeping."},
        {"iouscope_sqthread_running", MetricKind::gauge, "thread_info", kThread,
         "1 if the SQ thread was running or runnable at the last sample, 0 if asleep."},
        {"iouscope_sqthread_sq_cpu", MetricKind::gauge, "thread_info", with(kThread, {"pinned"}),
         "sqd->sq_cpu: the CPU the SQ thread is pinned to (pinned=\"true\", IORING_SETUP_SQ_AFF), or on newer kernels the CPU it last started on."},
        {"iouscope_sqthread_loop_passes_total", MetricKind::counter, "thread_pass", kThread,
         "Passes of the SQ thread's loop over its rings since iouscope attached. Deep tier, kernels with io_sq_tw (6.9+)."},
        {"iouscope_sqthread_busy_loop_passes_total", MetricKind::counter, "thread_pass", kThread,
         "Loop passes that served a ring or ran task work; the rest polled idle rings. Deep tier."},
        {"iouscope_sqthread_pass_work_seconds_total", MetricKind::counter, "thread_pass", kThread,
         "On-CPU time of the loop passes that served a ring, from the first ring's work to the end of the pass: the kernel's work-time bracket, measured with the monotonic clock. Deep tier."},
        {"iouscope_sqthread_task_work_seconds_total", MetricKind::counter, "thread_pass", kThread,
         "The part of the pass work spent in io_sq_tw running task work: under SQPOLL the completions of every ring the thread serves, charged to none of them. The rings' iouscope_ring_sqthread_work_seconds_total and this add up to the pass work. Deep tier, 6.9+."},
    };
}

// Per ring: counts, identity, the SQ thread's work on it, IOPOLL (deep tier).
std::vector<MetricDecl> ring_metrics() {
    return {
        {"iouscope_ring_sqes_total", MetricKind::counter, "ring", kRing,
         "SQEs consumed by the ring since it was created."},
        {"iouscope_ring_cqes_total", MetricKind::counter, "ring", kRing,
         "CQEs posted by the ring since it was created."},
        {"iouscope_ring_sq_backlog", MetricKind::gauge, "ring", kRing,
         "SQEs the application has queued that the ring's SQ thread has not consumed yet. Rings with an SQ thread only: elsewhere the application's own io_uring_enter consumes them."},
        {"iouscope_ring_sqthread_share", MetricKind::gauge, "ring", kRing,
         "The ring's share of its SQ thread's SQEs in the last sample interval."},
        {"iouscope_ring_sq_entries", MetricKind::gauge, "ring", kRing,
         "Size of the ring's submission queue."},
        {"iouscope_ring_cq_entries", MetricKind::gauge, "ring", kRing,
         "Size of the ring's completion queue: what it holds before CQEs take the overflow path."},
        {"iouscope_ring_info", MetricKind::gauge, "ring", with(kRing, {"setup"}),
         "1 for each ring with series of its own. setup lists the IORING_SETUP_* flags the ring was created with, lower case and comma-separated in bit order (e.g. sqpoll,sq_aff,single_issuer), bitN for a flag this iouscope has no name for; empty for none. Its sizes are iouscope_ring_sq_entries and iouscope_ring_cq_entries."},
        {"iouscope_ring_start_time_seconds", MetricKind::gauge, "ring", kRing,
         "Unix time the ring was created (or first seen, if it predates iouscope). When a ring closes and a new one gets the same pid:fd, its counters restart from zero and this changes: a counter reset, never a jump."},
        {"iouscope_ring_sqthread_work_seconds_total", MetricKind::counter, "ring", kRing,
         "SQ thread on-CPU time spent on this ring. Where iouscope_probe_attached{probe=\"loop_passes\"} is 1: the ring's turns in the thread's loop passes, which add up to iouscope_sqthread_pass_work_seconds_total; elsewhere its time submitting (io_submit_sqes) and polling (io_do_iopoll). Deep tier."},
        {"iouscope_ring_sqthread_submit_seconds_total", MetricKind::counter, "ring", kRing,
         "SQ thread on-CPU time inside io_submit_sqes for this ring (time switched out inside a "
         "call is left out). Deep tier."},
        {"iouscope_ring_sqthread_batches_total", MetricKind::counter, "ring", kRing,
         "io_submit_sqes calls made by the SQ thread for this ring. Deep tier."},
        {"iouscope_iopoll_calls_total", MetricKind::counter, "ring_iopoll", {"ring", "pid", "comm", "caller"},
         "io_do_iopoll calls on the ring. Deep tier."},
        {"iouscope_iopoll_empty_total", MetricKind::counter, "ring_iopoll", {"ring", "pid", "comm", "caller"},
         "io_do_iopoll calls that reaped nothing: spinning. Deep tier."},
        {"iouscope_iopoll_completions_total", MetricKind::counter, "ring_iopoll", {"ring", "pid", "comm", "caller"},
         "Completions reaped by io_do_iopoll. Deep tier."},
        {"iouscope_iopoll_seconds_total", MetricKind::counter, "ring_iopoll", {"ring", "pid", "comm", "caller"},
         "Time spent in io_do_iopoll; the SQ thread's (caller=\"sq_thread\") is its on-CPU "
         "time. Deep tier."},
    };
}

// The request path (request tier; CQ overflow in the default tier) and io-wq workers.
std::vector<MetricDecl> request_metrics() {
    return {
        {"iouscope_ring_requests_total", MetricKind::counter, "ring_requests", with(kRing, {"op"}),
         "Requests submitted on the ring, by opcode (op: the kernel's IORING_OP_* name in lower case, from its BTF). Request tier (--probes.requests), since iouscope attached."},
        {"iouscope_ring_request_punts_total", MetricKind::counter, "ring_requests", with(kRing, {"op", "reason"}),
         "Requests queued to an io-wq worker (io_uring_queue_async_work), by opcode and reason: forced (REQ_F_FORCE_ASYNC: the SQE's IOSQE_ASYNC, or an opcode the kernel always runs on io-wq, such as splice and tee) or other (not asked for: the request would have blocked and had nothing to poll, such as a file without a nowait path; an IOPOLL request the block layer sent back; drained work on 5.10). A request queued twice counts twice. Request tier."},
        {"iouscope_ring_request_punts_hashed_total", MetricKind::counter, "ring_requests", with(kRing, {"op"}),
         "Of iouscope_ring_request_punts_total, the punts whose work io-wq hashed to its file (io_wq_is_hashed, the tracepoint's rw or hashed argument): one worker runs them one at a time per file, so they serialize behind each other. Buffered writes to a regular file are hashed, and on an IOPOLL ring every request on a regular file. Request tier."},
        {"iouscope_ring_request_poll_arms_total", MetricKind::counter, "ring_requests", with(kRing, {"op"}),
         "Async poll arms (io_uring_poll_arm): the request waits for its file to be ready and is issued again. Request tier."},
        {"iouscope_ring_request_completions_total", MetricKind::counter, "ring_requests", with(kRing, {"op", "path", "result"}),
         "Final CQEs of requests seen submitted, by opcode, the path the request took (inline; io_wq: punted at least once; poll: armed for async poll, the later detour winning) and result (ok, eagain, ecanceled, etime, enobufs: a provided-buffer ring ran dry, other; untraced: the request's io_kiocb was submitted again before any completion was seen for it, which is how a CQE that took the overflow path shows on kernels that trace only CQEs that fit the CQ, 6.18 among them). A multishot request counts at its last CQE; IOSQE_CQE_SKIP_SUCCESS requests are not timed. Request tier on 5.19+ (the completion carries no request before)."},
        {"iouscope_ring_request_latency_seconds", MetricKind::histogram, "ring_requests", with(kRing, {"op", "path"}),
         "Submission to final CQE of the requests in iouscope_ring_request_completions_total, by opcode and path. Request tier, 5.19+."},
        {"iouscope_ring_requests_in_flight", MetricKind::gauge, "ring_requests", kRing,
         "Requests submitted and not yet completed at the sample (request tier, 5.19+). A request whose CQE took the overflow path unseen (see result=\"untraced\") stays counted until its io_kiocb is reused. With iouscope_ring_oldest_request_age_seconds, a request that never completes shows while it happens; the JSON snapshot names the oldest's opcode and fd."},
        {"iouscope_ring_oldest_request_age_seconds", MetricKind::gauge, "ring_requests", kRing,
         "Age of the ring's oldest request in flight at the sample, 0 when none. Request tier, 5.19+."},
        {"iouscope_ring_requests_stuck", MetricKind::gauge, "ring_requests", kRing,
         "Of iouscope_ring_requests_in_flight, those in flight longer than --requests.stuck-after (10s by default; 0 counts none) at the sample: a request that may never complete, while it happens. Request tier, 5.19+."},
        {"iouscope_ring_enters_total", MetricKind::counter, "ring_requests", kRing,
         "io_uring_enter calls on the ring (syscall tracepoints; request tier), waits and wakeups of an SQ thread included. With iouscope_ring_requests_total, whether submissions are batched."},
        {"iouscope_ring_sqes_per_enter", MetricKind::histogram, "ring_requests", kRing,
         "io_uring_enter calls by the SQEs each submitted (its result): le=\"0\" holds the calls that submitted none (waits, SQ thread wakeups), le=\"1\" the one-SQE calls, then 2-3, 4-7, ...; the sum is the SQEs submitted through io_uring_enter. On an SQPOLL ring the SQ thread submits, and every call counts as submitting none. Request tier."},
        {"iouscope_ring_enter_waits_total", MetricKind::counter, "ring_requests", kRing,
         "io_uring_enter calls that asked to wait for completions (IORING_ENTER_GETEVENTS). Request tier."},
        {"iouscope_ring_enter_wait_seconds_total", MetricKind::counter, "ring_requests", kRing,
         "Time in io_uring_enter calls that asked to wait for completions, entry to exit, their submission included: the application blocked on the ring. Request tier."},
        {"iouscope_ring_enter_issuer_switches_total", MetricKind::counter, "ring_requests", kRing,
         "io_uring_enter calls on the ring from a thread other than the previous call's (request tier). 0 while one thread submits and reaps, as IORING_SETUP_SINGLE_ISSUER requires; calls through a registered ring fd are not seen."},
        {"iouscope_ring_enter_wait_task_work_total", MetricKind::counter, "ring_requests", kRing,
         "Task-work batches run by a thread inside its io_uring_enter calls that waited on the ring (io_uring_task_work_run, 6.0+; io_uring_local_work_run under IORING_SETUP_DEFER_TASKRUN, 6.1+): each woke the waiter to post completions that come by task work (poll-driven reads, socket I/O), whether or not enough had come to end the wait. Per iouscope_ring_enter_waits_total, the wake-ups per wait DEFER_TASKRUN would cut to one. Request tier; absent on kernels without the tracepoint."},
        {"iouscope_ring_task_work_ipis_total", MetricKind::counter, "ring_requests", kRing,
         "IPIs the kernel sent to make a thread running its own code run its task work at once (task_work_add's TWA_SIGNAL kick, seen by the ipi_send_cpu tracepoint, 6.6+), counted on the last ring the thread used: the interruptions IORING_SETUP_COOP_TASKRUN would leave for its next system call. Request tier; absent on kernels without the tracepoint."},
        {"iouscope_ring_cq_overflow_cqes_total", MetricKind::counter, "ring_requests", kRing,
         "CQEs that found the ring's CQ full and took the overflow path (io_uring_cqe_overflow, 5.19+): the application reaps too slowly for its CQ size. Request tier; since iouscope attached. Present once the ring has overflowed: absent is none."},
        {"iouscope_ring_cq_overflow_dropped_total", MetricKind::counter, "ring_requests", kRing,
         "Of iouscope_ring_cq_overflow_cqes_total, the CQEs the kernel could not keep (no memory for the overflow entry): completions lost to the application."},
        {"iouscope_requests_unmatched_total", MetricKind::counter, "ring_requests", {},
         "Final CQEs whose submission the request tier did not see: requests submitted before it attached, or whose in-flight entry was lost to a full map (iouscope_map_overflow_total{map=\"req_inflight\"})."},
        {"iouscope_iowq_workers", MetricKind::gauge, "iowq", {"pid", "comm", "kind"},
         "Live io-wq workers (iou-wrk-* threads) of the process, by account: kind bound (regular files, block devices) or unbound (sockets, pipes, anything that may block long), as IORING_REGISTER_IOWQ_MAX_WORKERS names them. Request tier (--probes.requests): a walk of every task each sample, nothing on the I/O path. Present while the process has a live worker or one exited since iouscope attached."},
        {"iouscope_iowq_max_workers", MetricKind::gauge, "iowq", {"pid", "comm", "kind"},
         "The kernel's limit on workers of that account, the largest among the process's io-wqs with a live worker of it (one io-wq per thread that submits; IORING_REGISTER_IOWQ_MAX_WORKERS sets it). Present where iouscope_iowq_workers is above 0."},
        {"iouscope_iowq_queues", MetricKind::gauge, "iowq", {"pid", "comm"},
         "The process's io-wqs with a live worker: each thread that submits has its own, with its own limits."},
        {"iouscope_iowq_workers_created_total", MetricKind::counter, "iowq", {"pid", "comm"},
         "io-wq workers of the process started since iouscope attached, those that exited between two samples included."},
        {"iouscope_iowq_workers_exited_total", MetricKind::counter, "iowq", {"pid", "comm"},
         "io-wq workers of the process that exited since iouscope attached (sched_process_exit): idle ones after 5 s, all of a thread's when it exits."},
        {"iouscope_iowq_worker_cpu_seconds_total", MetricKind::counter, "iowq", {"pid", "comm"},
         "CPU time of the process's io-wq workers: the live ones' whole lives and those that exited since iouscope attached."},
        {"iouscope_iowq_requests_in_flight", MetricKind::gauge, "iowq", {"pid", "comm"},
         "Requests of the process's rings in flight on io-wq at the sample, queued or on a worker: beside iouscope_iowq_workers, what the workers are there for (a worker per request that blocks; more workers than requests are idle ones, fewer mean requests queued behind max_workers). Request tier on 5.19+ (where completions are seen); present with the process's worker series."},
    };
}

// Folded rings and the rings by mode.
std::vector<MetricDecl> fold_metrics() {
    return {
        {"iouscope_ring_series_limit", MetricKind::gauge, "ring_fold", {},
         "Plain rings (no SQPOLL, no IOPOLL) that get iouscope_ring_* series of their own, at most (--rings.series-limit); 0 = every ring. The places go to the busiest rings and change hands only to a ring twice as busy, after a minute; the other plain rings are folded into their process's iouscope_process_folded_*. SQPOLL and IOPOLL rings always have their own."},
        {"iouscope_process_folded_rings", MetricKind::gauge, "ring_fold", {"pid", "comm", "mode", "sq_thread"},
         "Plain rings of the process without series of their own at the last sample (see iouscope_ring_series_limit). Present while the process holds a ring and some of its rings were folded. mode is always plain and sq_thread empty, as on those rings' own series, so a selector on either takes both."},
        {"iouscope_process_folded_ring_sqes_total", MetricKind::counter, "ring_fold", {"pid", "comm", "mode", "sq_thread"},
         "SQEs consumed by the process's rings while they were folded. A ring's own iouscope_ring_sqes_total covers its whole life, folded or not: add the two only for rates."},
        {"iouscope_process_folded_ring_cqes_total", MetricKind::counter, "ring_fold", {"pid", "comm", "mode", "sq_thread"},
         "CQEs posted to the process's rings while they were folded."},
        {"iouscope_process_folded_ring_requests_total", MetricKind::counter, "ring_fold", {"pid", "comm", "mode", "sq_thread", "op"},
         "Requests the process's rings submitted while they were folded, by opcode (request tier): iouscope_ring_requests_total of the rings without series of their own. Their punts and completions fold in the two families below; their results, poll arms and latency are not folded."},
        {"iouscope_process_folded_ring_request_punts_total", MetricKind::counter, "ring_fold", {"pid", "comm", "mode", "sq_thread", "op", "reason"},
         "io-wq punts of the process's rings while they were folded, by opcode and reason, as iouscope_ring_request_punts_total counts them (request tier)."},
        {"iouscope_process_folded_ring_request_completions_total", MetricKind::counter, "ring_fold", {"pid", "comm", "mode", "sq_thread", "op", "path"},
         "Final CQEs on the process's rings while they were folded, by opcode and the path the request took, as iouscope_ring_request_completions_total counts them but without the result (request tier, 5.19+)."},
        {"iouscope_rings", MetricKind::gauge, "ring_count", {"mode"},
         "Live io_uring instances by mode."},
        {"iouscope_rings_created_total", MetricKind::counter, "ring_count", {"mode"},
         "Rings created since iouscope attached, from the io_uring_create tracepoint."},
        {"iouscope_rings_short_lived_total", MetricKind::counter, "ring_count", {"mode"},
         "Rings created and destroyed between two samples: never walked, so their counts are not in iouscope_ring_*."},
    };
}

// NVMe passthrough completions per device and IOPOLL over every ring (deep tier).
std::vector<MetricDecl> device_metrics() {
    return {
        {"iouscope_nvme_uring_cmd_completions_total", MetricKind::counter, "device", {"device", "polled"},
         "NVMe passthrough (uring_cmd) completions, by whether the request sat on a poll queue. Deep tier."},
        {"iouscope_nvme_uring_cmd_polls_total", MetricKind::counter, "device", {"device"},
         "nvme_ns_chr_uring_cmd_iopoll calls: poll attempts. Deep tier."},
        {"iouscope_nvme_uring_cmd_polled_irq_total", MetricKind::counter, "device", {"device"},
         "Requests that asked to be polled but were completed by an interrupt."},
        {"iouscope_device_iopoll_without_poll_queues", MetricKind::gauge, "device", {"device"},
         "1 if polled requests to the device were completed by interrupts in the last minute: it has no poll queues (nvme poll_queues=0)."},
        {"iouscope_nvme_uring_cmd_latency_seconds", MetricKind::histogram, "device", {"device"},
         "NVMe passthrough request latency, from request start to end_io. Deep tier."},
        {"iouscope_nvme_uring_cmd_cqes_total", MetricKind::counter, "device", {"device"},
         "NVMe passthrough completions handed to io_uring (io_uring_cmd_done). Deep tier."},
        {"iouscope_nvme_uring_cmd_cqe_delay_seconds", MetricKind::histogram, "device", {"device"},
         "Time from a passthrough request's end_io to io_uring_cmd_done: the task-work hop before its CQE. Deep tier."},
        {"iouscope_iopoll_host_calls_total", MetricKind::counter, "device", {"caller"},
         "io_do_iopoll calls on every ring since attach, closed rings included."},
        {"iouscope_iopoll_host_empty_total", MetricKind::counter, "device", {"caller"},
         "Empty io_do_iopoll calls on every ring since attach."},
        {"iouscope_iopoll_host_completions_total", MetricKind::counter, "device", {"caller"},
         "Completions reaped by io_do_iopoll on every ring since attach."},
    };
}

// Each probe's state, and the daemon's own.
std::vector<MetricDecl> daemon_metrics() {
    return {
        {"iouscope_probe_attached", MetricKind::gauge, "probe", {"probe", "kind"},
         "1 if the BPF program is attached, 0 if it is off (see the log for why)."},
        {"iouscope_probe_gated", MetricKind::gauge, "probe", {"probe", "kind"},
         "1 while the scheduler gate (--probes.sched-gate) has an attached probe detached: there is no SQ thread, none has slept since it started (lazy, the default where no CPU is nohz_full), or every one has run 5 s without sleeping, so sched_switch and sched_waking would see nothing of theirs. Sleeps meanwhile come from the threads' voluntary switches and time off the CPU; wakers and wake latency are not recorded (iouscope_sqthread_untraced_wakeups_total)."},
        {"iouscope_probe_missed_total", MetricKind::counter, "probe", {"probe", "kind"},
         "Runs of an attached probe the kernel skipped because another BPF program was running on the CPU (kprobes hit from interrupts): its counts are short by this much."},
        {"iouscope_probe_coverage_ratio", MetricKind::gauge, "probe", {"probe"},
         "SQEs a deep probe saw submitted over the SQEs the rings' heads passed, on SQPOLL rings, over the last sample interval (absent below 100 SQEs). Under 1: the probe is attached but misses call sites (a partially inlined function)."},
        {"iouscope_probe_coverage_sqes_total", MetricKind::counter, "probe", {"probe", "seen_by"},
         "The two sides of iouscope_probe_coverage_ratio, cumulative: seen_by=\"probe\" or \"iterator\"."},
        {"iouscope_probe_waiting", MetricKind::gauge, "probe", {"probe", "kind"},
         "1 while an attached probe waits for a kernel module to load before it can see anything: the NVMe tracepoint variant until nvme_core is loaded (the log names the module)."},
        {"iouscope_probe_duty_ratio", MetricKind::gauge, "probe", {"probe"},
         "Most of the time a duty-cycled probe is attached (--probes.gap-sampling ON/PERIOD): a window closes before ON once it has recorded 1.25 s and 20,000 gaps, or at once where no ring has SQPOLL, and iouscope_probe_attached_seconds_total has the time it was attached. Present only for probe=\"work_gaps\" where it runs once per SQE; elsewhere it records at full rate."},
        {"iouscope_probe_window_active", MetricKind::gauge, "probe", {"probe"},
         "1 while a duty-cycled probe's window is open at the sample."},
        {"iouscope_probe_windows_total", MetricKind::counter, "probe", {"probe"},
         "Windows a duty-cycled probe has opened."},
        {"iouscope_probe_windows_closed_early_total", MetricKind::counter, "probe", {"probe"},
         "Windows of a duty-cycled probe that closed before their on-time: they had recorded enough gaps (20,000, and 1.25 s), or no ring had SQPOLL, whose threads alone it records."},
        {"iouscope_probe_attached_seconds_total", MetricKind::counter, "probe", {"probe"},
         "Time a duty-cycled probe was attached, its windows' lengths: the time its per-SQE program cost."},
        {"iouscope_probe_recorded_seconds_total", MetricKind::counter, "probe", {"probe"},
         "Time a duty-cycled probe recorded (each window less its first 2.15 s, which only find where gaps start). The advisor scales the gaps of a window by its length over this."},
        {"iouscope_probe_window_attach_failures_total", MetricKind::counter, "probe", {"probe"},
         "Windows of a duty-cycled probe that could not attach (the log says why); they record nothing and count in no recorded time."},
        {"iouscope_advice_finding", MetricKind::gauge, "advice", {"finding", "subject", "sq_thread", "ring", "device"},
         "1 for each tuning finding of the advisor over its window (iouscope advise explains it). The finding label is stable: sq_idle_too_long, sq_spinning_without_work, sq_thread_overpriced, shared_thread_backlog, sq_threads_should_share, iopoll_without_poll_queues, requests_forced_async, requests_punted_without_nowait, single_sqe_per_enter, cq_overflow, provided_buffers_ran_dry, requests_stuck, iowq_workers_idle."},
        {"iouscope_advice_predicted_cpu_saving_cores", MetricKind::gauge, "advice", {"finding", "subject"},
         "CPU (cores) the advisor predicts its recommended change would save."},
        {"iouscope_advice_window_seconds", MetricKind::gauge, "advice", {},
         "Length of the window the advisor judged; 0 while it has too little data."},
        {"iouscope_map_overflow_total", MetricKind::counter, "daemon", {"map"},
         "Entries a bounded BPF map could not take; non-zero means data was lost."},
        {"iouscope_map_entries", MetricKind::gauge, "daemon", {"map"},
         "Entries in each bounded BPF map at the last sample; they must stay flat when rings and threads come and go."},
        {"iouscope_map_capacity", MetricKind::gauge, "daemon", {"map"},
         "Entries each bounded BPF map can hold (--maps.rings, --maps.sq-threads). An insert beyond it fails and counts in iouscope_map_overflow_total."},
        {"iouscope_identities_replaced_total", MetricKind::counter, "daemon", {"kind"},
         "Rings that took a closed ring's kernel address, and SQ threads that took an exited thread's tid: each started from its own counts."},
        {"iouscope_walks_incomplete_total", MetricKind::counter, "daemon", {},
         "Ring walks that stopped before the end of the task list (an error); rings they did not reach kept their state."},
        {"iouscope_walks_light_total", MetricKind::counter, "daemon", {},
         "Ring walks that passed over the plain rings they knew (--rings.plain-interval): those rings kept their counts from the last walk that read them."},
        {"iouscope_rings_carried", MetricKind::gauge, "daemon", {},
         "Plain rings the last walk passed over, their counts carried from the last walk that read them. 0 after a full walk."},
        {"iouscope_samples_total", MetricKind::counter, "daemon", {},
         "Samples taken since the daemon started."},
        {"iouscope_sample_duration_seconds", MetricKind::gauge, "daemon", {},
         "Time the last sample took: iterator walk plus map reads."},
        {"iouscope_last_sample_timestamp_seconds", MetricKind::gauge, "daemon", {},
         "Unix time of the last sample."},
        {"iouscope_host_visible", MetricKind::gauge, "daemon", {"scope"},
         "1 if the daemon sees all of the host's scope, 0 if only its own namespace's (logged at start): tasks (0 without hostPID: rings held outside its PID namespace are missed), cgroups (0 when its cgroup2 mount is its cgroup namespace's subtree: processes outside it get no container or pod)."},
        {"iouscope_build_info", MetricKind::gauge, "daemon", {"version"},
         "Version of iouscope, always 1."},
        {"iouscope_process_info", MetricKind::gauge, "process", {"pid", "comm", "cgroup", "container_id", "pod_uid"},
         "1 for each process that holds a ring or owns an SQ thread: its cgroup v2 path, and the container (runtime://id, as kube_pod_container_info gives it) and pod UID that path names; empty where there is none. Join on pid: ... * on(pid) group_left(container_id, pod_uid) iouscope_process_info."},
    };
}

// clang-format on

}  // namespace

const std::vector<MetricDecl>& metric_catalog() {
    static const std::vector<MetricDecl> catalog = [] {
        std::vector<MetricDecl> all;
        for (auto part : {thread_metrics, ring_metrics, request_metrics, fold_metrics,
                          device_metrics, daemon_metrics}) {
            auto decls = part();
            all.insert(all.end(), std::make_move_iterator(decls.begin()),
                       std::make_move_iterator(decls.end()));
        }
        return all;
    }();
    return catalog;
}

const MetricDecl& metric_decl(std::string_view name) {
    for (const auto& d : metric_catalog())
        if (d.name == name) return d;
    throw std::out_of_range("metric family " + std::string(name) +
                            " is not declared in exporters/metric_catalog.cpp");
}

std::string_view kind_name(MetricKind k) {
    switch (k) {
        case MetricKind::counter:
            return "counter";
        case MetricKind::gauge:
            return "gauge";
        case MetricKind::histogram:
            return "histogram";
    }
    return "untyped";
}

namespace {

std::string label_list(const MetricDecl& d) {
    std::string out;
    for (auto l : d.labels) out += (out.empty() ? "" : ",") + std::string(l);
    return out;
}

}  // namespace

std::string metrics_help_list() {
    std::string out = "METRICS (" + std::to_string(metric_catalog().size()) +
                      " families; iouscoped --metrics lists them with their types)\n";
    std::string_view section;
    for (const auto& d : metric_catalog()) {
        if (d.section != section) {
            section = d.section;
            out += "  " + std::string(section) + ":\n";
        }
        out += "    " + std::string(d.name);
        if (!d.labels.empty()) out += "{" + label_list(d) + "}";
        out += "\n";
    }
    return out + "  docs/ARCHITECTURE.md describes each one and how it is derived.";
}

std::string metrics_table() {
    std::string out;
    for (const auto& d : metric_catalog())
        out += std::string(d.name) + "\t" + std::string(kind_name(d.kind)) + "\t" + label_list(d) +
               "\t" + std::string(d.help) + "\n";
    return out;
}

}  // namespace iouscope
