#pragma once
// Tuning advice from two snapshots: everything is a difference of cumulative counters between
// `from` and `to`, so the daemon (rolling window) and `iouscope advise` (fresh window) use the
// same code. Pure: no clock, no I/O; the unit tests feed hand-made snapshots. make_advice and
// the window are in model/advisor.cpp, each family of findings in a model/advisor_*.cpp of its
// own, the idle model in model/advisor_idle_model.hpp.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/advisor_idle_model.hpp"
#include "model/snapshot.hpp"

namespace iouscope {

struct AdviseOptions {
    double min_window_seconds = 5;       // shorter windows give no advice
    double min_cpu_saving_cores = 0.10;  // smaller predicted savings are not worth a finding
    // How many CPU-seconds one second of I/O delayed by a wake is worth: the exchange rate
    // between the two costs of sq_thread_idle. 100 means that spinning 5 ms more is worth it
    // to save one 50 us wake.
    double wake_weight = 100;
    double assumed_wake_latency_seconds = 50e-6;  // used while no wake has been measured
    double idle_ring_max_sqe_rate = 10;           // SQEs/s below which a ring counts as idle
    double spinning_min_cpu_cores = 0.20;
    double backlog_min_fraction = 0.5;     // share of samples with SQEs waiting
    double share_min_spin_fraction = 0.5;  // spin / CPU of a thread worth merging
    double share_max_work_cores = 0.8;     // combined work must fit in one thread
    // What one submission costs without SQPOLL: an io_uring_enter that submits one SQE. The
    // programs measure it at start-up (collect/submit_cost.hpp); the source says how it was got.
    double submit_syscall_seconds = 1e-6;
    std::string submit_cost_source = "assumed: 1 us per io_uring_enter";
    // sq_thread_overpriced: an SQ thread costing this many times its cheapest alternative, and
    // at least this much of a CPU, gets a finding whatever its SQE rate.
    double price_ratio = 10;
    double price_min_cpu_cores = 0.05;
    // Scores (CPU plus weighted delay) closer than this share of the larger are a tie. They rest
    // on the syscall cost each daemon measures once at start-up, which differs by a tenth between
    // two daemons on one host, and on wake_weight, a judgement: neither can part them.
    double tie_margin = 0.15;
    // The submissions one batch may gather when batching is priced: never more than this delay.
    double batch_max_delay_seconds = 0.010;
    // The request path (advisor_requests.cpp). Punts per second of one opcode on one ring below
    // which neither punt finding is worth making, and the share of the opcode's requests that
    // requests_punted_without_nowait needs punted.
    double punt_min_rate = 50;
    double punt_min_share = 0.5;
    // requests_forced_async: forced requests whose io-wq median is at most this waited for
    // nothing (a read from the page cache takes microseconds there, one that blocks far more).
    double forced_max_iowq_p50_seconds = 0.001;
    // single_sqe_per_enter: SQEs per io_uring_enter below this on a ring that batching would
    // save min_cpu_saving_cores on.
    double batch_max_sqes_per_enter = 1.5;
    double enobufs_min_rate = 1;  // -ENOBUFS per second worth a finding
    // iowq_workers_idle: at least this many live workers, more than iowq_idle_ratio per request
    // in flight on io-wq, at both ends of the window; the cap it names is twice the requests in
    // flight, at least iowq_min_limit.
    std::uint32_t iowq_idle_min_workers = 16;
    double iowq_idle_ratio = 4;
    std::int64_t iowq_min_limit = 4;
    // The cap holds each io-wq (one per submitting thread): it must save this many workers.
    std::uint32_t iowq_idle_min_saved = 8;
    // waiter_woken_per_completion: task-work wake-ups per wait of a single-issuer ring at least
    // this, and DEFER_TASKRUN saving at least this many wake-ups a second.
    double taskrun_min_wakes_per_wait = 2;
    double taskrun_min_saved_wakes = 1000;
    // task_work_interrupts_thread: IPIs a second for task work worth a finding.
    double coop_min_ipis = 500;
};

Advice make_advice(const Snapshot& from, const Snapshot& to, const AdviseOptions& opts = {});
// sq_thread_overpriced's choice among its alternatives, by CPU plus wake_weight times the delay
// each adds per second; "now", the unavailable and those dearer than `cpu_now` never win. It
// reports a finding only for a change beyond sq_thread_idle, which sq_idle_too_long speaks for.
// So that the finding does not come and go with one measurement, the best other change wins
// unless sq_thread_idle beats it by more than tie_margin; inside the margin, `tied_idle` names
// the idle setting it ties with. Marks the winner recommended.
struct AlternativeChoice {
    Alternative* recommended = nullptr;      // null: nothing cheaper than now
    const Alternative* tied_idle = nullptr;  // sq_thread_idle, within tie_margin of the winner
};
AlternativeChoice choose_alternative(std::vector<Alternative>& alts, double cpu_now, double sqes,
                                     const AdviseOptions& o);

// Seconds from one sample to another, on the monotonic clock when both have it.
double seconds_between(const Snapshot& from, const Snapshot& to);

// Keeps the snapshots the daemon's rolling window needs and turns each new one into advice.
class AdviceWindow {
public:
    AdviceWindow(double window_seconds, AdviseOptions opts = {})
        : window_s_(window_seconds), opts_(opts) {}
    // Advice for `now` against the snapshot about window_seconds older; remembers `now`. A
    // verdict over a window moves little in a sample: it is judged afresh once it is a twelfth
    // of the window old (5 s at the default minute), and the samples between get the last one.
    // At 1,000 SQ threads judging was 7 % of the daemon's time.
    Advice update(const std::shared_ptr<const Snapshot>& now);

private:
    double window_s_;
    AdviseOptions opts_;
    std::vector<std::shared_ptr<const Snapshot>> history_;  // oldest first, spaced window/8
    std::shared_ptr<const Snapshot> judged_;                // the snapshot last judged
    Advice last_;                                           // and its verdict
};

}  // namespace iouscope
