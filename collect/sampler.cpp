#include "collect/sampler.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "common/clock.hpp"

namespace iouscope {

Sampler::Sampler(BpfCollector& bpf, KernelTraits traits, std::shared_ptr<SnapshotStore> store,
                 std::string kernel_release, unsigned config_hz)
    : bpf_(bpf),
      traits_(traits),
      store_(std::move(store)),
      kernel_(std::move(kernel_release)),
      view_(read_host_view()),
      cgroups_(view_.cgroup.point),
      capacities_(bpf.map_capacities()) {
    for (const auto& limit : host_view_limits(view_)) spdlog::warn("{}", limit);
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    hostname_ = host;
    agg_.set_hz(config_hz);
}

// Paths for the walk's cgroup ids: only those alive now, so the map costs what is alive.
void Sampler::resolve_cgroups(RawSample& raw) {
    if (cgroups_.mount().empty()) return;
    std::set<std::uint64_t> ids;
    for (const auto& r : raw.rings) {
        ids.insert(r.cgroup_id);
        if (r.sq_cgroup_id) ids.insert(r.sq_cgroup_id);
    }
    raw.cgroup_paths = cgroups_.resolve(ids);
}

bool Sampler::collect(RawSample& raw) {
    raw.kernel = traits_;
    std::string err;
    const bool light = carry_.light(monotonic_ns());
    if (!bpf_.read_sample(raw, err, light)) {
        spdlog::error("sample failed: {}", err);
        return false;
    }
    carry_.splice(raw);
    if (!raw.walk_complete)
        spdlog::warn("ring walk ended early ({}); rings it did not reach are kept as they were",
                     err);
    resolve_cgroups(raw);
    raw.sched_untraced = raw.sched_untraced || gate_moved_;
    gate_moved_ = false;
    return true;
}

void Sampler::enable_sched_gate(bool lazy) {
    gate_ = SchedGate(lazy);
    gate_enabled_ = false;
    if (!bpf_.attached(ProbeId::sched_switch) || !bpf_.attached(ProbeId::sched_waking)) return;
    if (const char* holder = bpf_.gate_holder()) {
        spdlog::info("scheduler gate off: probe {} needs every context switch of an SQ thread",
                     holder);
        return;
    }
    gate_enabled_ = true;
}

// After the update: the gate reads the threads the walk saw, and moves the programs when it
// changes its mind. A failed attach is logged and tried again at the next walk, which finds the
// gate still wanting it open.
void Sampler::move_sched_gate(const RawSample& raw) {
    if (!gate_enabled_) return;
    const auto threads = agg_.gate_threads();
    const bool closed = gate_.observe(threads, raw.walk_complete, raw.mono_ns);
    if (closed == bpf_.sched_gate_closed()) return;
    std::string err;
    const bool ok = bpf_.set_sched_gate(closed, err);
    gate_moved_ = true;
    if (!ok)
        spdlog::warn(
            "scheduler gate: cannot attach again ({}); sleeps come from voluntary "
            "switch counts until it can",
            err);
    else if (closed && threads.empty())
        spdlog::info("scheduler gate closed: no SQ thread; sched_switch and sched_waking detached");
    else if (closed)
        spdlog::info(
            "scheduler gate closed: {} SQ thread(s) busy without sleeping; "
            "sched_switch and sched_waking detached",
            threads.size());
    else
        spdlog::info(
            "scheduler gate open: an SQ thread slept, or a new one started; "
            "sched_switch and sched_waking attached");
}

// One log line when a device starts or stops completing polled requests by interrupts.
void Sampler::log_poll_queue_changes(const Snapshot& snap) {
    for (const auto& d : snap.devices) {
        bool was = flagged_.count(d.name) != 0;
        if (d.iopoll_without_poll_queues && !was) {
            flagged_.insert(d.name);
            spdlog::warn(
                "device {}: polled (IOPOLL) requests are completed by interrupts ({} so "
                "far): the device has no poll queues. Load the nvme driver with "
                "poll_queues=N (e.g. nvme.poll_queues=2 on the kernel command line, or "
                "options nvme poll_queues=2 in /etc/modprobe.d), then re-create the "
                "namespace's queues.",
                d.name, d.polled_intent_irq);
        } else if (!d.iopoll_without_poll_queues && was) {
            flagged_.erase(d.name);
            spdlog::info("device {}: no more polled requests completed by interrupts", d.name);
        }
    }
}

// The advisor's findings over its window, each logged once when it appears and when it clears.
void Sampler::advise(const std::shared_ptr<Snapshot>& snap) {
    snap->advice = advice_->update(snap);
    std::set<std::pair<std::string, std::string>> now;  // (finding, subject)
    for (const auto& f : snap->advice.findings) {
        now.emplace(f.id, f.subject);
        if (!logged_findings_.count({f.id, f.subject}))
            spdlog::warn("advice {} ({}): {}. Change: {}", f.id, f.subject, f.summary, f.change);
    }
    for (const auto& [id, subject] : logged_findings_)
        if (!now.count({id, subject})) spdlog::info("advice cleared: {} ({})", id, subject);
    logged_findings_ = std::move(now);
}

bool Sampler::sample_once() {
    const auto t0 = std::chrono::steady_clock::now();
    RawSample raw = agg_.take_raw();
    if (!collect(raw)) return false;
    auto snap = std::make_shared<Snapshot>(agg_.update(raw));
    series_.apply(*snap);
    bpf_.cleanup(agg_.cleanup());
    log_poll_queue_changes(*snap);
    snap->probes = bpf_.probes_with_misses();
    move_sched_gate(raw);
    snap->opcode_names = bpf_.opcode_names();  // the request findings name opcodes
    if (advice_) advise(snap);
    snap->map_entries = {{"ring_births", raw.births.size()},  {"sched_state", raw.sched.size()},
                         {"wakers", raw.wakers.size()},       {"ring_work", raw.ring_work.size()},
                         {"iopoll_stats", raw.iopoll.size()}, {"nvme_stats", raw.nvme.size()},
                         {"work_gaps", raw.gaps.size()},      {"sq_passes", raw.passes.size()}};
    // The request object's maps that exist: the overflow probe's is the default tier's.
    const RequestSample& rq = raw.requests;
    if (rq.overflow_probe) snap->map_entries.emplace_back("ring_overflow", rq.overflow.size());
    if (rq.on) {
        snap->map_entries.emplace_back("req_stats", rq.stats.size());
        snap->map_entries.emplace_back("req_inflight", rq.inflight_entries);
    }
    if (rq.enter_probe) snap->map_entries.emplace_back("ring_enters", rq.enters.size());
    if (raw.requests.iowq_probe)
        snap->map_entries.emplace_back("iowq_exits", raw.requests.iowq_exits.size());
    snap->map_capacity = capacities_;
    snap->hostname = hostname_;
    snap->kernel = kernel_;
    snap->host_visible = {{"tasks", view_.host_pid_namespace},
                          {"cgroups", view_.cgroup.whole_hierarchy}};
    snap->sample_duration_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spdlog::debug("sample {}: {} rings, {} SQ threads, {:.3f} ms", snap->seq, snap->rings.size(),
                  snap->threads.size(), snap->sample_duration_seconds * 1e3);
    store_->publish(std::move(snap));
    carry_.keep(raw);
    agg_.recycle(std::move(raw));
    return true;
}

void Sampler::set_plain_interval(std::chrono::nanoseconds period,
                                 std::chrono::nanoseconds interval) {
    if (period > interval && !bpf_.light_walks()) {
        spdlog::info(
            "every walk reads every ring: without io_uring_create, a walk could not tell a new "
            "ring from a closed plain ring at the same address");
        period = std::chrono::nanoseconds(0);
    }
    carry_ = RingCarry(static_cast<std::uint64_t>(period.count()),
                       static_cast<std::uint64_t>(interval.count()));
}

void Sampler::enable_advice(double window_seconds, AdviseOptions opts) {
    advice_ = std::make_unique<AdviceWindow>(window_seconds, opts);
}

void Sampler::run(std::stop_token stop, std::chrono::nanoseconds interval) {
    std::mutex mu;
    std::condition_variable_any cv;
    auto next = std::chrono::steady_clock::now();
    while (!stop.stop_requested()) {
        next += interval;
        std::unique_lock lock(mu);
        if (cv.wait_until(lock, stop, next, [] { return false; })) break;
        if (stop.stop_requested()) break;
        sample_once();
        // After a stall (suspend, long walk) skip missed ticks instead of bursting.
        auto now = std::chrono::steady_clock::now();
        if (now > next + interval) next = now;
    }
}

}  // namespace iouscope
