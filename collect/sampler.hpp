#pragma once
// The sampler: one thread that, every interval, drains io_uring_create records, walks the rings,
// reads the sched maps, aggregates and publishes a Snapshot. Readers never call into it.
#include <chrono>
#include <memory>
#include <set>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "collect/bpf_loader.hpp"
#include "collect/cgroups.hpp"
#include "collect/host_view.hpp"
#include "model/advisor.hpp"
#include "model/aggregator.hpp"
#include "model/ring_carry.hpp"
#include "model/ring_series.hpp"
#include "model/snapshot_store.hpp"

namespace iouscope {

class Sampler {
public:
    Sampler(BpfCollector& bpf, KernelTraits traits, std::shared_ptr<SnapshotStore> store,
            std::string kernel_release, unsigned config_hz);

    // Takes and publishes one sample. Returns false (and logs) if the walk failed.
    bool sample_once();

    // Attaches the advisor's findings over a rolling window to every snapshot, and logs each
    // finding when it appears and when it clears.
    void enable_advice(double window_seconds, AdviseOptions opts = {});

    // Detaches sched_switch and sched_waking while every SQ thread runs without sleeping, and
    // attaches them again at the first walk that finds one that did (model/sched_gate.hpp).
    // Only where both are attached, since without them there is nothing to gate, and no
    // attached probe holds the gate open (the deep tier's loop passes): that case is logged.
    // Lazy: also while there is no SQ thread, and until a new one sleeps.
    void enable_sched_gate(bool lazy = false);

    // At most `limit` plain rings with series of their own, 0 for every ring
    // (model/ring_series.hpp). RingSeries::kDefaultLimit until called.
    void set_ring_series_limit(std::size_t limit) { series_ = RingSeries(limit); }

    // Plain rings read in full at most `period` apart, the walks between passing over them
    // (model/ring_carry.hpp); 0, or a period within the interval, reads every ring at every
    // walk, as does a kernel without io_uring_create. Every ring at every walk until called.
    void set_plain_interval(std::chrono::nanoseconds period, std::chrono::nanoseconds interval);

    // Samples every `interval` until stop is requested. Drift-free: the schedule is absolute.
    void run(std::stop_token stop, std::chrono::nanoseconds interval);

private:
    // BPF to raw sample (BpfCollector::read_sample, one pass), then the walk's cgroup paths.
    bool collect(RawSample& raw);
    void resolve_cgroups(RawSample& raw);
    void log_poll_queue_changes(const Snapshot& snap);
    void advise(const std::shared_ptr<Snapshot>& snap);
    void move_sched_gate(const RawSample& raw);
    BpfCollector& bpf_;
    KernelTraits traits_;
    std::shared_ptr<SnapshotStore> store_;
    std::string hostname_, kernel_;
    Aggregator agg_;
    RingSeries series_;
    RingCarry carry_;
    HostView view_;
    CgroupPaths cgroups_;
    // The maps' capacities: fixed once the collector is made, so read once, not per sample.
    std::vector<std::pair<std::string, std::uint64_t>> capacities_;
    std::set<std::string> flagged_;  // devices logged as IOPOLL without poll queues
    std::unique_ptr<AdviceWindow> advice_;
    std::set<std::pair<std::string, std::string>> logged_findings_;  // (finding, subject) logged
    bool gate_enabled_ = false;
    SchedGate gate_;
    bool gate_moved_ = false;  // opened or closed since the last walk
};

}  // namespace iouscope
