#include "exporters/json_exporter.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "exporters/utf8.hpp"

namespace iouscope {

NLOHMANN_JSON_SERIALIZE_ENUM(WorkSource, {{WorkSource::kernel, "kernel"},
                                          {WorkSource::loop_passes, "loop_passes"},
                                          {WorkSource::submit_and_poll, "submit_and_poll"},
                                          {WorkSource::estimate, "estimate"}})
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LatencyHistogram, upper_bounds_s, cumulative, count,
                                                sum_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(WakerSnapshot, pid, comm, wakeups, context)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(WorkGaps, count, sum_ns, sleep_spins,
                                                sleep_spin_seconds, open_gap_seconds,
                                                recorded_seconds)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GapSampling, on_seconds, period_seconds,
                                                cutoff_seconds, recorded_seconds, attached_seconds,
                                                windows, closed_early, attach_failures, active)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Figure, name, value, unit)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(IdleCurvePoint, setting_seconds, effective_seconds,
                                                cpu_cores, wakeups_per_second, current, recommended)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Alternative, name, change, cpu_cores,
                                                wakeups_per_second, added_latency_seconds,
                                                available, recommended, note)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Finding, id, subject, sq_thread, ring, device, pid,
                                                comm, container_id, pod_uid, summary, evidence,
                                                change, predicted, assumption, curve, alternatives)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Advice, window_seconds, gaps_available, findings,
                                                notes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(CgroupLabels, cgroup, container_id, pod_uid)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ProcessSnapshot, pid, comm, cgroup)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(
    ThreadSnapshot, tid, pid, comm, cgroup, start_time_seconds, cpu_seconds, work_seconds,
    spin_seconds, sleep_seconds, work_source, work_by_source_seconds, sleeps, blocks, block_seconds,
    spin_model, split_known, wakeups, untraced_wakeups, voluntary_switches, involuntary_switches,
    state, sq_cpu, pinned, idle_setting_seconds, idle_ns_granular, shared_percpu, wake_latency,
    wake_latency_log2, wake_p50_seconds, wake_p99_seconds, rings, fairness, rings_work_seconds,
    cpu_util, work_util, spin_util, sleep_util, sqe_rate, sleep_rate, wakeup_rate, block_rate,
    wakers, has_gaps, gaps, has_passes, loop_passes, busy_passes, pass_work_seconds,
    task_work_seconds, pass_rate, empty_pass_ratio)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(IopollSnapshot, caller, calls, empty, completions,
                                                seconds, calls_rate, empty_ratio,
                                                completions_per_call)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RequestPathSnapshot, completed, results, latency)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RequestOpSnapshot, opcode, submitted, punted,
                                                punted_forced, punted_hashed, poll_armed, paths)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RingRequests, has_requests, timed, ops, in_flight,
                                                stuck, oldest_age_seconds, oldest_opcode, oldest_fd,
                                                has_enters, enters, enter_sqes, enter_waits,
                                                enter_wait_seconds, issuer_switches,
                                                has_wait_task_work, wait_task_work,
                                                has_task_work_ipis, task_work_ipis, sqes_per_enter,
                                                has_overflow, overflow_cqes, overflow_dropped)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(
    RingSnapshot, id, start_time_seconds, pid, fd, comm, cgroup, mode, sq_thread, setup_flags,
    sq_entries, cq_entries, sqes_total, cqes_total, sq_backlog, sqthread_share, sqe_rate, cqe_rate,
    samples, samples_with_backlog, backlog_sum, has_sqthread_work, sqthread_work_seconds,
    sqthread_submit_seconds, sqthread_batches, iopoll, requests, folded, carried)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(FoldedOp, opcode, submitted, punted_forced,
                                                punted_other, completed)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(FoldedRings, pid, comm, rings, sqes_total,
                                                cqes_total, requests)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(IowqSnapshot, pid, comm, workers, max_workers,
                                                queues, cpu_seconds, created, exited,
                                                requests_in_flight)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(DeviceSnapshot, name, polled, irq,
                                                polled_intent_irq, polls, latency,
                                                latency_p50_seconds, latency_p99_seconds,
                                                completions_rate, polled_ratio,
                                                polls_per_completion, iopoll_without_poll_queues,
                                                has_cqes, cqes, cqe_delay)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ProbeState, probe, kind, attached, reason, missed,
                                                waiting_for, gated)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ProbeCoverage, probe, probe_events, iterator_events,
                                                ratio)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(
    Snapshot, hostname, kernel, seq, timestamp, monotonic_seconds, interval_seconds,
    sample_duration_seconds, hz, idle_ns_supported, threads, rings, processes, folded,
    ring_series_limit, devices, iopoll_host, probes, host_visible, coverage, rings_created_by_mode,
    rings_short_lived_by_mode, map_overflows, map_entries, map_capacity, rings_replaced,
    threads_replaced, walks_incomplete, walks_light, rings_carried, requests_unmatched, iowq_probe,
    iowq, advice)

std::string snapshot_to_json(const Snapshot& snap) {
    nlohmann::json j = snap;
    j["schema"] = kSchemaVersion;
    // The names of the opcodes in rings[].requests.ops, by value, as the kernel has them.
    if (snap.opcode_names) j["opcode_names"] = *snap.opcode_names;
    // Absent where every gap is recorded (nlohmann has no std::optional support in bookworm's).
    if (snap.gap_sampling) j["gap_sampling"] = *snap.gap_sampling;
    // comm names are arbitrary bytes; JSON must be UTF-8 or nlohmann refuses to dump it.
    // cgroup directory names, too.
    const auto cgroup = [](nlohmann::json& c) {
        c["cgroup"]["cgroup"] = sanitize_utf8(c["cgroup"]["cgroup"].get<std::string>());
    };
    for (auto& p : j["processes"]) {
        p["comm"] = sanitize_utf8(p["comm"].get<std::string>());
        cgroup(p);
    }
    for (auto& t : j["threads"]) {
        t["comm"] = sanitize_utf8(t["comm"].get<std::string>());
        cgroup(t);
        for (auto& w : t["wakers"]) w["comm"] = sanitize_utf8(w["comm"].get<std::string>());
    }
    for (auto& r : j["rings"]) {
        r["comm"] = sanitize_utf8(r["comm"].get<std::string>());
        cgroup(r);
    }
    for (auto& f : j["folded"]) f["comm"] = sanitize_utf8(f["comm"].get<std::string>());
    for (auto& f : j["iowq"]) f["comm"] = sanitize_utf8(f["comm"].get<std::string>());
    for (auto& f : j["advice"]["findings"]) {
        f["comm"] = sanitize_utf8(f["comm"].get<std::string>());
        // Summaries and changes quote ring ids and comms.
        for (const char* k : {"summary", "change", "subject"})
            f[k] = sanitize_utf8(f[k].get<std::string>());
    }
    return j.dump();
}

std::string advice_to_json(const Advice& advice) {
    nlohmann::json j = advice;
    j["schema"] = kSchemaVersion;
    for (auto& f : j["findings"])
        for (const char* k : {"comm", "summary", "change", "subject"})
            f[k] = sanitize_utf8(f[k].get<std::string>());
    return j.dump();
}

Snapshot snapshot_from_json(const std::string& text) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        throw std::runtime_error(std::string("not JSON: ") + e.what());
    }
    if (!j.is_object() || !j.contains("schema"))
        throw std::runtime_error("not a iouscope snapshot (no \"schema\" field)");
    if (j["schema"] != kSchemaVersion)
        throw std::runtime_error("snapshot schema " + j["schema"].dump() + ", this build reads " +
                                 std::to_string(kSchemaVersion));
    try {
        auto snap = j.get<Snapshot>();
        if (j.contains("gap_sampling")) snap.gap_sampling = j["gap_sampling"].get<GapSampling>();
        if (j.contains("opcode_names"))
            snap.opcode_names = std::make_shared<const std::vector<std::string>>(
                j["opcode_names"].get<std::vector<std::string>>());
        return snap;
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(std::string("malformed snapshot: ") + e.what());
    }
}

}  // namespace iouscope
