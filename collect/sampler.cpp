#include "collect/sampler.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <tuple>
#include <utility>

#include "common/clock.hpp"

namespace iouscope {

namespace {

double unix_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// The sample's instant on both clocks: the realtime clock read between two monotonic reads,
// retried while the pair took more than 1 ms. A sampler preempted between two plain reads
// (measured: 0.5 s in a TCG guest whose one free CPU the daemon shares) would put every
// counter of the sample half a second away from its timestamp.
std::pair<std::uint64_t, double> clock_pair() {
    std::uint64_t best_span = ~0ull, mono = 0;
    double unix = 0;
    for (int i = 0; i < 5 && best_span > 1'000'000; ++i) {
        const std::uint64_t before = monotonic_ns();
        const double u = unix_now();
        const std::uint64_t after = monotonic_ns();
        if (after - before < best_span) {
            best_span = after - before;
            mono = before + (after - before) / 2;
            unix = u;
        }
    }
    return {mono, unix};
}

}  // namespace

Sampler::Sampler(BpfCollector& bpf, KernelTraits traits, std::shared_ptr<SnapshotStore> store,
                 std::string kernel_release, unsigned config_hz)
    : bpf_(bpf),
      traits_(traits),
      ring_turns_(bpf.provides(Feature::ring_turns)),
      cmd_done_(bpf.provides(Feature::cmd_cqes)),
      submit_probe_(bpf.provides(Feature::submit_time)),
      store_(std::move(store)),
      kernel_(std::move(kernel_release)),
      view_(read_host_view()),
      cgroups_(view_.cgroup.point) {
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
    bpf_.refresh_modules();
    // Drain before the walk: a ring created after the drain is walked now and recognised when
    // its record is drained next time; one that died before the walk is counted as short-lived.
    bpf_.drain_created(raw.created);
    std::string err;
    std::tie(raw.mono_ns, raw.unix_time) = clock_pair();
    bool complete = true;
    if (!bpf_.walk_rings(raw.rings, complete, err)) {
        spdlog::error("sample failed: {}", err);
        return false;
    }
    if (!complete)
        spdlog::warn("ring walk ended early ({}); rings it did not reach are kept as they were",
                     err);
    raw.walk_complete = complete;
    if (complete)
        bpf_.note_sqpoll_rings(std::any_of(raw.rings.begin(), raw.rings.end(), [](auto& r) {
            return (r.setup_flags & IOU_SETUP_SQPOLL) != 0;
        }));
    resolve_cgroups(raw);
    // The sample's time is when the walk read its first record, not when it was asked for: a
    // sampler delayed between the two would skew every rate of the interval.
    if (!raw.rings.empty() && raw.rings.front().read_ns > raw.mono_ns) {
        const std::uint64_t late = raw.rings.front().read_ns - raw.mono_ns;
        raw.mono_ns += late;
        raw.unix_time += static_cast<double>(late) / 1e9;
    }
    bpf_.read_births(raw.births);
    // Wakers before sched: a wake that lands between the two reads then shows in the total and
    // not yet by waker, so a thread's wakeups named by context never exceed its total in one
    // sample. Read the other way round, the NVMe test saw 40 named against 39 (seeds kernel).
    bpf_.read_wakers(raw.wakers);
    bpf_.read_sched(raw.sched);
    bpf_.read_ring_work(raw.ring_work);
    bpf_.read_iopoll(raw.iopoll);
    bpf_.read_nvme(raw.nvme);
    bpf_.read_gaps(raw.gaps);
    bpf_.read_passes(raw.passes);
    raw.ring_turns = ring_turns_;
    raw.cmd_done = cmd_done_;
    raw.submit_probe = submit_probe_;
    raw.gap_sampling = bpf_.gap_sampling(raw.mono_ns);
    raw.stats = bpf_.stats();
    raw.sched_untraced = bpf_.sched_gate_closed() || gate_moved_;
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
    RawSample raw;
    if (!collect(raw)) return false;
    auto snap = std::make_shared<Snapshot>(agg_.update(raw));
    bpf_.cleanup(agg_.cleanup());
    log_poll_queue_changes(*snap);
    snap->probes = bpf_.probes_with_misses();
    move_sched_gate(raw);
    if (advice_) advise(snap);
    snap->map_entries = {{"ring_births", raw.births.size()},  {"sched_state", raw.sched.size()},
                         {"wakers", raw.wakers.size()},       {"ring_work", raw.ring_work.size()},
                         {"iopoll_stats", raw.iopoll.size()}, {"nvme_stats", raw.nvme.size()},
                         {"work_gaps", raw.gaps.size()},      {"sq_passes", raw.passes.size()}};
    snap->hostname = hostname_;
    snap->kernel = kernel_;
    snap->host_visible = {{"tasks", view_.host_pid_namespace},
                          {"cgroups", view_.cgroup.whole_hierarchy}};
    snap->sample_duration_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spdlog::debug("sample {}: {} rings, {} SQ threads, {:.3f} ms", snap->seq, snap->rings.size(),
                  snap->threads.size(), snap->sample_duration_seconds * 1e3);
    store_->publish(std::move(snap));
    return true;
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
