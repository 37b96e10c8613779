#pragma once
// The hand-made snapshots the exporters' tests render (tests/unit/exporters/*_test.cpp).
#include <string>

#include "iouscope/requests.h"
#include "model/snapshot.hpp"

namespace iouscope::test {

// One SQ thread with its SQPOLL ring, a plain ring of the same process, and two probes.
inline Snapshot one_thread_snapshot(const std::string& comm) {
    Snapshot s;
    s.seq = 3;
    ThreadSnapshot t;
    t.tid = 42;
    t.pid = 41;
    t.comm = comm;
    t.cpu_seconds = 2;
    t.work_seconds = 0.5;
    t.spin_seconds = 1.5;
    t.rings = 1;
    t.wake_latency.upper_bounds_s = {1e-6, 2e-6};
    t.wake_latency.cumulative = {1, 3};
    t.wake_latency.count = 4;
    t.wake_latency.sum_s = 0.25;
    t.wakers.push_back({7, "waker", 9, "task"});
    s.threads.push_back(t);
    RingSnapshot r;
    r.id = "41:5";
    r.pid = 41;
    r.fd = 5;
    r.comm = comm;
    r.mode = "sqpoll";
    r.sq_thread = 42;
    r.sqes_total = 1000;
    r.cqes_total = 999;
    s.rings.push_back(r);
    RingSnapshot plain = r;
    plain.id = "41:6";
    plain.mode = "plain";
    plain.sq_thread = -1;
    s.rings.push_back(plain);
    s.probes.push_back({"sched_switch", "tp_btf", true, ""});
    s.probes.push_back({"io_uring_create", "tp_btf", false, "kernel lacks it"});
    return s;
}

inline LatencyHistogram histogram() {
    LatencyHistogram h;
    h.upper_bounds_s = {1e-6, 1e-3};
    h.cumulative = {1, 2};
    h.count = 2;
    h.sum_s = 1e-3;
    return h;
}

// A snapshot in which every section has something to say, deep tier and advice included.
inline Snapshot full_snapshot() {
    Snapshot s;
    s.seq = 7;
    s.gap_sampling = GapSampling{6, 60, 2, 8, 2, 0, true};
    s.processes.push_back({41, "db", {"/system.slice/docker-x.scope", "docker://x", ""}});
    s.host_visible = {{"tasks", true}, {"cgroups", false}};
    ThreadSnapshot t;
    t.tid = 42;
    t.pid = 41;
    t.comm = "db";
    t.rings = 1;
    t.sq_cpu = 1;
    t.spin_model = "after_idle";
    t.wake_latency = histogram();
    t.wakers.push_back({7, "waker", 9, "task"});
    t.work_by_source_seconds.push_back({WorkSource::loop_passes, 1.0});
    t.has_gaps = true;
    t.has_passes = true;
    s.threads.push_back(t);
    RingSnapshot r;
    r.id = "41:5";
    r.pid = 41;
    r.fd = 5;
    r.comm = "db";
    r.mode = "sqpoll";
    r.sq_thread = 42;
    r.has_sqthread_work = true;
    IopollSnapshot io;
    io.caller = "sq_thread";
    r.iopoll.push_back(io);
    r.requests.has_requests = r.requests.timed = r.requests.has_overflow = true;
    RequestOpSnapshot op;
    op.opcode = 22;
    op.submitted = 3;
    op.punted = op.punted_forced = 1;
    op.punted_hashed = 1;
    op.paths[IOU_PATH_IOWQ].completed = 1;
    op.paths[IOU_PATH_IOWQ].results[IOU_RES_ENOBUFS] = 1;
    op.paths[IOU_PATH_IOWQ].latency = histogram();
    r.requests.ops.push_back(op);
    r.requests.in_flight = 2;
    r.requests.overflow_cqes = 1;
    r.requests.has_enters = true;
    r.requests.enters = 4;
    r.requests.has_wait_task_work = true;
    r.requests.wait_task_work = 3;
    r.requests.has_task_work_ipis = true;
    r.requests.task_work_ipis = 2;
    r.requests.sqes_per_enter = histogram();
    r.requests.oldest_age_seconds = 1.5;
    s.opcode_names =
        std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"nop", "readv"});
    s.rings.push_back(r);
    s.folded.push_back({41, "db", 2, 10, 10, {{22, 7, 1, 2, {4, 3, 0}}}});
    s.iowq_probe = true;
    IowqSnapshot w;
    w.pid = 41;
    w.comm = "db";
    w.workers = {3, 1};
    w.max_workers = {8, 64};
    w.queues = 2;
    w.cpu_seconds = 1.5;
    w.created = 5;
    w.exited = 1;
    w.requests_in_flight = 4;
    s.iowq.push_back(w);
    s.ring_series_limit = 1;
    DeviceSnapshot d;
    d.name = "nvme0n1";
    d.latency = histogram();
    d.cqe_delay = histogram();
    d.has_cqes = true;
    s.devices.push_back(d);
    s.iopoll_host.push_back(io);
    s.probes.push_back({"io_submit_sqes", "fentry", true, "", 3, "nvme_core"});
    ProbeCoverage c;
    c.probe = "io_submit_sqes";
    c.ratio = 1;
    s.coverage.push_back(c);
    s.rings_created_by_mode = {{"sqpoll", 1}};
    s.rings_short_lived_by_mode = {{"sqpoll", 0}};
    s.map_overflows = {{"wakers", 0}};
    s.map_entries = {{"wakers", 1}};
    s.map_capacity = {{"wakers", 8192}};
    Finding f;
    f.id = "sq_idle_too_long";
    f.subject = "sq_thread 42";
    f.sq_thread = 42;
    f.predicted.push_back({"cpu_cores_saved", 0.5, "cores"});
    s.advice.findings.push_back(f);
    s.advice.window_seconds = 60;
    return s;
}

}  // namespace iouscope::test
