#include "exporters/prometheus_exporter.hpp"

#include <algorithm>
#include <map>
#include <span>
#include <string_view>

#include "exporters/exposition.hpp"
#include "model/setup_flags.hpp"

namespace iouscope {

namespace {

// A per-CPU shared SQ thread (seeds patch 000) serves rings of several processes: its pid and
// comm would charge it to its creator alone, so it has neither and says shared="percpu".
Labels thread_labels(const ThreadSnapshot& t) {
    return {{"sq_thread", std::to_string(t.tid)},
            {"pid", t.shared_percpu ? std::string() : std::to_string(t.pid)},
            {"comm", t.shared_percpu ? std::string() : t.comm},
            {"shared", t.shared_percpu ? "percpu" : ""}};
}

Labels ring_labels(const RingSnapshot& r) {
    return {{"ring", r.id},
            {"pid", std::to_string(r.pid)},
            {"comm", r.comm},
            {"mode", r.mode},
            {"sq_thread", r.sq_thread > 0 ? std::to_string(r.sq_thread) : std::string()}};
}

// A family with one series per entity (an SQ thread, a ring, a device): the value read from the
// entity, and whether the entity has that series at all (null: every entity has it).
template <class E>
struct PerEntity {
    std::string_view family;
    double (*value)(const E&);
    bool (*when)(const E&) = nullptr;
};

// An entity's field as a series value, and as the condition of one.
template <auto Field, class E>
double field(const E& e) {
    return static_cast<double>(e.*Field);
}
template <auto Flag, class E>
bool is(const E& e) {
    return e.*Flag;
}

// The families of one table, added to the exposition in the table's order; add() gives each the
// series of one entity under the entity's labels. A family is a counter or a gauge as the
// catalogue declares it.
template <class E>
class PerEntityFamilies {
public:
    PerEntityFamilies(Exposition& ex, std::span<const PerEntity<E>> rows) : rows_(rows) {
        for (const auto& r : rows) families_.push_back(&ex.add(r.family));
    }
    void add(const Labels& l, const E& e) {
        for (std::size_t i = 0; i < rows_.size(); ++i)
            if (!rows_[i].when || rows_[i].when(e)) families_[i]->value(l, rows_[i].value(e));
    }

private:
    std::span<const PerEntity<E>> rows_;
    std::vector<Family*> families_;
};

}  // namespace

namespace {

// Per SQ thread: its CPU split into work, spin and sleep, and how the split was made. Until HZ is
// known a jiffies idle setting splits nothing: no series beats a wrong one.
constexpr PerEntity<ThreadSnapshot> kThreadCpu[] = {
    {"iouscope_sqthread_cpu_seconds_total", field<&ThreadSnapshot::cpu_seconds>},
    {"iouscope_sqthread_work_seconds_total", field<&ThreadSnapshot::work_seconds>,
     is<&ThreadSnapshot::split_known>},
    {"iouscope_sqthread_spin_seconds_total", field<&ThreadSnapshot::spin_seconds>,
     is<&ThreadSnapshot::split_known>},
    {"iouscope_sqthread_sleep_seconds_total", field<&ThreadSnapshot::sleep_seconds>},
    {"iouscope_sqthread_blocks_total", field<&ThreadSnapshot::blocks>},
    {"iouscope_sqthread_blocked_seconds_total", field<&ThreadSnapshot::block_seconds>},
};

void thread_cpu_families(Exposition& ex, const Snapshot& s) {
    PerEntityFamilies<ThreadSnapshot> cpu(ex, kThreadCpu);
    Family& model = ex.add("iouscope_sqthread_spin_model");
    Family& source = ex.add("iouscope_sqthread_work_time_source");
    Family& by_source = ex.add("iouscope_sqthread_work_by_source_seconds_total");

    for (const auto& t : s.threads) {
        auto l = thread_labels(t);
        cpu.add(l, t);
        if (!t.split_known) continue;
        auto ls = l;
        ls.push_back({"source", to_string(t.work_source)});
        source.gauge(ls, 1);
        for (const auto& [src, seconds] : t.work_by_source_seconds) {
            auto lb = l;
            lb.push_back({"source", to_string(src)});
            by_source.counter(lb, seconds);
        }
        if (!t.spin_model.empty()) {
            auto lm = l;
            lm.push_back({"model", t.spin_model});
            model.gauge(lm, 1);
        }
    }
}

// Per SQ thread: sleeps, wakeups and who woke it, context switches, wake latency.
constexpr PerEntity<ThreadSnapshot> kThreadWake[] = {
    {"iouscope_sqthread_sleeps_total", field<&ThreadSnapshot::sleeps>},
    {"iouscope_sqthread_wakeups_total", field<&ThreadSnapshot::wakeups>},
    {"iouscope_sqthread_untraced_wakeups_total", field<&ThreadSnapshot::untraced_wakeups>},
    {"iouscope_sqthread_voluntary_switches_total", field<&ThreadSnapshot::voluntary_switches>},
    {"iouscope_sqthread_involuntary_switches_total", field<&ThreadSnapshot::involuntary_switches>},
};

void thread_wake_families(Exposition& ex, const Snapshot& s) {
    PerEntityFamilies<ThreadSnapshot> wakes(ex, kThreadWake);
    Family& by_waker = ex.add("iouscope_sqthread_wakeups_by_waker_total");
    Family& latency = ex.add("iouscope_sqthread_wakeup_latency_seconds");

    for (const auto& t : s.threads) {
        auto l = thread_labels(t);
        wakes.add(l, t);
        for (const auto& w : t.wakers) {
            auto lw = l;
            lw.push_back({"waker_pid", std::to_string(w.pid)});
            lw.push_back({"waker_comm", w.comm});
            lw.push_back({"waker_context", w.context.empty() ? "task" : w.context});
            by_waker.counter(lw, static_cast<double>(w.wakeups));
        }
        latency.histogram(l, t.wake_latency);
    }
}

// Per SQ thread: its rings and their fairness, settings, state and CPU.
constexpr PerEntity<ThreadSnapshot> kThreadInfo[] = {
    {"iouscope_sqthread_rings", field<&ThreadSnapshot::rings>},
    {"iouscope_sqthread_fairness", field<&ThreadSnapshot::fairness>},
    {"iouscope_sqthread_start_time_seconds", field<&ThreadSnapshot::start_time_seconds>},
    {"iouscope_sqthread_idle_setting_seconds", field<&ThreadSnapshot::idle_setting_seconds>},
    {"iouscope_sqthread_running", [](const ThreadSnapshot& t) { return t.state == 0 ? 1.0 : 0.0; }},
};

void thread_info_families(Exposition& ex, const Snapshot& s) {
    PerEntityFamilies<ThreadSnapshot> info(ex, kThreadInfo);
    Family& sq_cpu = ex.add("iouscope_sqthread_sq_cpu");

    for (const auto& t : s.threads) {
        auto l = thread_labels(t);
        info.add(l, t);
        if (t.sq_cpu >= 0) {
            l.push_back({"pinned", t.pinned ? "true" : "false"});
            sq_cpu.gauge(l, t.sq_cpu);
        }
    }
}

// Per process that holds a ring or owns an SQ thread: where it runs. An info metric, so that the
// ring and thread series keep their labels and a query joins on pid for the container or pod
// (docs/DASHBOARDS.md).
void process_families(Exposition& ex, const Snapshot& s) {
    Family& info = ex.add("iouscope_process_info");
    for (const auto& p : s.processes)
        info.gauge({{"pid", std::to_string(p.pid)},
                    {"comm", p.comm},
                    {"cgroup", p.cgroup.cgroup},
                    {"container_id", p.cgroup.container_id},
                    {"pod_uid", p.cgroup.pod_uid}},
                   1);
}

// Per SQ thread: its loop passes and their work (deep tier, 6.9+).
constexpr PerEntity<ThreadSnapshot> kThreadPasses[] = {
    {"iouscope_sqthread_loop_passes_total", field<&ThreadSnapshot::loop_passes>},
    {"iouscope_sqthread_busy_loop_passes_total", field<&ThreadSnapshot::busy_passes>},
    {"iouscope_sqthread_pass_work_seconds_total", field<&ThreadSnapshot::pass_work_seconds>},
    {"iouscope_sqthread_task_work_seconds_total", field<&ThreadSnapshot::task_work_seconds>},
};

void thread_pass_families(Exposition& ex, const Snapshot& s) {
    PerEntityFamilies<ThreadSnapshot> passes(ex, kThreadPasses);
    for (const auto& t : s.threads)
        if (t.has_passes) passes.add(thread_labels(t), t);
}

// Per ring: SQEs and CQEs, backlog, share of its SQ thread, and the SQ thread's work on it
// (deep tier).
constexpr PerEntity<RingSnapshot> kRing[] = {
    {"iouscope_ring_sqes_total", field<&RingSnapshot::sqes_total>},
    {"iouscope_ring_cqes_total", field<&RingSnapshot::cqes_total>},
    {"iouscope_ring_sq_backlog", field<&RingSnapshot::sq_backlog>,
     [](const RingSnapshot& r) { return r.sq_thread > 0; }},
    {"iouscope_ring_sqthread_share", field<&RingSnapshot::sqthread_share>,
     [](const RingSnapshot& r) { return r.sq_thread > 0; }},
    {"iouscope_ring_sq_entries", field<&RingSnapshot::sq_entries>},
    {"iouscope_ring_cq_entries", field<&RingSnapshot::cq_entries>},
    {"iouscope_ring_start_time_seconds", field<&RingSnapshot::start_time_seconds>},
    {"iouscope_ring_sqthread_work_seconds_total", field<&RingSnapshot::sqthread_work_seconds>,
     is<&RingSnapshot::has_sqthread_work>},
    {"iouscope_ring_sqthread_submit_seconds_total", field<&RingSnapshot::sqthread_submit_seconds>,
     is<&RingSnapshot::has_sqthread_work>},
    {"iouscope_ring_sqthread_batches_total", field<&RingSnapshot::sqthread_batches>,
     is<&RingSnapshot::has_sqthread_work>},
};

void ring_families(Exposition& ex, const Snapshot& s) {
    PerEntityFamilies<RingSnapshot> rings(ex, kRing);
    Family& info = ex.add("iouscope_ring_info");
    for (const auto& r : s.rings) {
        if (r.folded) continue;
        auto labels = ring_labels(r);
        rings.add(labels, r);
        labels.push_back({"setup", setup_flag_names(r.setup_flags)});
        info.gauge(labels, 1);
    }
}

// The paths a request takes (enum iou_req_path).
constexpr std::string_view kPaths[] = {"inline", "io_wq", "poll"};

// io-wq punts of one opcode by reason: forced (REQ_F_FORCE_ASYNC) or other.
void punts_by_reason(Family& punts, const Labels& op, std::uint64_t forced, std::uint64_t other) {
    for (auto [reason, n] : {std::pair{"forced", forced}, std::pair{"other", other}}) {
        auto l = op;
        l.push_back({"reason", reason});
        punts.counter(l, static_cast<double>(n));
    }
}

// Plain rings beyond the series limit, folded per process (model/ring_series.hpp).
void ring_fold_families(Exposition& ex, const Snapshot& s) {
    ex.add("iouscope_ring_series_limit").gauge({}, static_cast<double>(s.ring_series_limit));
    Family& rings = ex.add("iouscope_process_folded_rings");
    Family& sqes = ex.add("iouscope_process_folded_ring_sqes_total");
    Family& cqes = ex.add("iouscope_process_folded_ring_cqes_total");
    Family& requests = ex.add("iouscope_process_folded_ring_requests_total");
    Family& punts = ex.add("iouscope_process_folded_ring_request_punts_total");
    Family& completions = ex.add("iouscope_process_folded_ring_request_completions_total");
    for (const auto& f : s.folded) {
        // Labelled as the rings they stand for, so one selector (mode, sq_thread) takes both.
        const Labels l{
            {"pid", std::to_string(f.pid)}, {"comm", f.comm}, {"mode", "plain"}, {"sq_thread", ""}};
        rings.gauge(l, static_cast<double>(f.rings));
        sqes.counter(l, static_cast<double>(f.sqes_total));
        cqes.counter(l, static_cast<double>(f.cqes_total));
        for (const auto& o : f.requests) {
            const Labels lo{{"pid", std::to_string(f.pid)},
                            {"comm", f.comm},
                            {"mode", "plain"},
                            {"sq_thread", ""},
                            {"op", opcode_name(s, o.opcode)}};
            requests.counter(lo, static_cast<double>(o.submitted));
            punts_by_reason(punts, lo, o.punted_forced, o.punted_other);
            for (std::size_t p = 0; p < o.completed.size(); ++p) {
                if (o.completed[p] == 0 && p != 0) continue;  // a path never taken
                auto lp = lo;
                lp.push_back({"path", std::string(kPaths[p])});
                completions.counter(lp, static_cast<double>(o.completed[p]));
            }
        }
    }
}

// Per ring and caller: io_do_iopoll calls, empty calls, completions and time (deep tier).
constexpr PerEntity<IopollSnapshot> kRingIopoll[] = {
    {"iouscope_iopoll_calls_total", field<&IopollSnapshot::calls>},
    {"iouscope_iopoll_empty_total", field<&IopollSnapshot::empty>},
    {"iouscope_iopoll_completions_total", field<&IopollSnapshot::completions>},
    {"iouscope_iopoll_seconds_total", field<&IopollSnapshot::seconds>},
};

void ring_iopoll_families(Exposition& ex, const Snapshot& s) {
    PerEntityFamilies<IopollSnapshot> iopoll(ex, kRingIopoll);
    for (const auto& r : s.rings)
        for (const auto& io : r.iopoll)
            iopoll.add({{"ring", r.id},
                        {"pid", std::to_string(r.pid)},
                        {"comm", r.comm},
                        {"caller", io.caller}},
                       io);
}

constexpr std::string_view kResults[] = {"ok",      "eagain", "ecanceled", "etime",
                                         "enobufs", "other",  "untraced"};

// One ring's opcode: requests, punts by reason and the hashed ones, poll arms, and per path taken
// its completions by result and its latency.
struct RequestFamilies {
    Family &requests, &punts, &hashed, &poll_arms, &completions, &latency;

    void add(const Labels& ring, const std::string& op, const RequestOpSnapshot& o, bool timed) {
        auto l = ring;
        l.push_back({"op", op});
        requests.counter(l, static_cast<double>(o.submitted));
        poll_arms.counter(l, static_cast<double>(o.poll_armed));
        hashed.counter(l, static_cast<double>(o.punted_hashed));
        punts_by_reason(punts, l, o.punted_forced, o.punted_other());
        if (!timed) return;
        for (std::size_t p = 0; p < o.paths.size(); ++p) {
            const auto& path = o.paths[p];
            if (path.completed == 0) continue;  // a path this opcode never took
            auto lp = l;
            lp.push_back({"path", std::string(kPaths[p])});
            latency.histogram(lp, path.latency);
            for (std::size_t r = 0; r < path.results.size(); ++r) {
                if (path.results[r] == 0 && r != 0) continue;  // a result never seen
                auto lr = lp;
                lr.push_back({"result", std::string(kResults[r])});
                completions.counter(lr, static_cast<double>(path.results[r]));
            }
        }
    }
};

// Per ring with series of its own: its requests per opcode (request tier), the requests in
// flight and the oldest's age, and its CQ overflow (default tier, 5.19+).
void ring_request_families(Exposition& ex, const Snapshot& s) {
    RequestFamilies f{ex.add("iouscope_ring_requests_total"),
                      ex.add("iouscope_ring_request_punts_total"),
                      ex.add("iouscope_ring_request_punts_hashed_total"),
                      ex.add("iouscope_ring_request_poll_arms_total"),
                      ex.add("iouscope_ring_request_completions_total"),
                      ex.add("iouscope_ring_request_latency_seconds")};
    Family& in_flight = ex.add("iouscope_ring_requests_in_flight");
    Family& oldest = ex.add("iouscope_ring_oldest_request_age_seconds");
    Family& stuck = ex.add("iouscope_ring_requests_stuck");
    Family& enters = ex.add("iouscope_ring_enters_total");
    Family& per_enter = ex.add("iouscope_ring_sqes_per_enter");
    Family& waits = ex.add("iouscope_ring_enter_waits_total");
    Family& wait_s = ex.add("iouscope_ring_enter_wait_seconds_total");
    Family& switches = ex.add("iouscope_ring_enter_issuer_switches_total");
    Family& wait_tw = ex.add("iouscope_ring_enter_wait_task_work_total");
    Family& ipis = ex.add("iouscope_ring_task_work_ipis_total");
    Family& overflow = ex.add("iouscope_ring_cq_overflow_cqes_total");
    Family& dropped = ex.add("iouscope_ring_cq_overflow_dropped_total");
    for (const auto& r : s.rings) {
        if (r.folded) continue;
        const auto& rq = r.requests;
        // The default tier's overflow probe marks every ring: only one that overflowed has
        // series, and the others must not cost a label set per scrape (10,000 at 10,000 rings).
        const bool overflowed = rq.has_overflow && rq.overflow_cqes > 0;
        if (!rq.has_requests && !overflowed && !rq.has_enters) continue;
        const auto labels = ring_labels(r);
        if (rq.has_enters) {
            enters.counter(labels, static_cast<double>(rq.enters));
            if (rq.enters > 0) per_enter.histogram(labels, rq.sqes_per_enter);
            waits.counter(labels, static_cast<double>(rq.enter_waits));
            wait_s.counter(labels, rq.enter_wait_seconds);
            switches.counter(labels, static_cast<double>(rq.issuer_switches));
            if (rq.has_wait_task_work)
                wait_tw.counter(labels, static_cast<double>(rq.wait_task_work));
            if (rq.has_task_work_ipis) ipis.counter(labels, static_cast<double>(rq.task_work_ipis));
        }
        // Only for a ring that has overflowed: two zero series on every ring of a host would
        // carry nothing and cost the exposition 2 series a ring (20,000 at 10,000 rings).
        if (overflowed) {
            overflow.counter(labels, static_cast<double>(rq.overflow_cqes));
            dropped.counter(labels, static_cast<double>(rq.overflow_dropped));
        }
        for (const auto& o : rq.ops) f.add(labels, opcode_name(s, o.opcode), o, rq.timed);
        if (rq.timed) {
            in_flight.gauge(labels, static_cast<double>(rq.in_flight));
            oldest.gauge(labels, rq.oldest_age_seconds);
            stuck.gauge(labels, static_cast<double>(rq.stuck));
        }
    }
    ex.add("iouscope_requests_unmatched_total")
        .counter({}, static_cast<double>(s.requests_unmatched));
}

// Per process: its io-wq workers (request tier), live by account, created, exited, CPU, and
// its rings' requests in flight on io-wq beside them.
void iowq_families(Exposition& ex, const Snapshot& s) {
    if (!s.iowq_probe) return;
    Family& workers = ex.add("iouscope_iowq_workers");
    Family& limit = ex.add("iouscope_iowq_max_workers");
    Family& queues = ex.add("iouscope_iowq_queues");
    Family& created = ex.add("iouscope_iowq_workers_created_total");
    Family& exited = ex.add("iouscope_iowq_workers_exited_total");
    Family& cpu = ex.add("iouscope_iowq_worker_cpu_seconds_total");
    Family& in_flight = ex.add("iouscope_iowq_requests_in_flight");
    for (const auto& p : s.iowq) {
        const Labels l{{"pid", std::to_string(p.pid)}, {"comm", p.comm}};
        for (std::size_t k = 0; k < p.workers.size(); ++k) {
            const Labels lk{{"pid", std::to_string(p.pid)},
                            {"comm", p.comm},
                            {"kind", k == 0 ? "bound" : "unbound"}};
            workers.gauge(lk, p.workers[k]);
            if (p.workers[k]) limit.gauge(lk, p.max_workers[k]);
        }
        queues.gauge(l, p.queues);
        created.counter(l, static_cast<double>(p.created));
        exited.counter(l, static_cast<double>(p.exited));
        cpu.counter(l, p.cpu_seconds);
        if (p.requests_in_flight >= 0)
            in_flight.gauge(l, static_cast<double>(p.requests_in_flight));
    }
}

// Rings by mode: live now, created and short-lived since attach.
void ring_count_families(Exposition& ex, const Snapshot& s) {
    std::map<std::string, int> by_mode = {{"plain", 0}, {"sqpoll", 0}, {"iopoll", 0}, {"both", 0}};
    for (const auto& r : s.rings) ++by_mode[r.mode];
    Family& rings_by_mode = ex.add("iouscope_rings");
    for (const auto& [mode, n] : by_mode) rings_by_mode.gauge({{"mode", mode}}, n);
    Family& created = ex.add("iouscope_rings_created_total");
    for (const auto& [mode, n] : s.rings_created_by_mode)
        created.counter({{"mode", mode}}, static_cast<double>(n));
    Family& short_lived = ex.add("iouscope_rings_short_lived_total");
    for (const auto& [mode, n] : s.rings_short_lived_by_mode)
        short_lived.counter({{"mode", mode}}, static_cast<double>(n));
}

// Per NVMe namespace (deep tier), and IOPOLL totals over every ring since attach.
constexpr PerEntity<DeviceSnapshot> kDevice[] = {
    {"iouscope_nvme_uring_cmd_polls_total", field<&DeviceSnapshot::polls>},
    {"iouscope_nvme_uring_cmd_polled_irq_total", field<&DeviceSnapshot::polled_intent_irq>},
    {"iouscope_device_iopoll_without_poll_queues",
     field<&DeviceSnapshot::iopoll_without_poll_queues>},
};
constexpr PerEntity<IopollSnapshot> kHostIopoll[] = {
    {"iouscope_iopoll_host_calls_total", field<&IopollSnapshot::calls>},
    {"iouscope_iopoll_host_empty_total", field<&IopollSnapshot::empty>},
    {"iouscope_iopoll_host_completions_total", field<&IopollSnapshot::completions>},
};

void device_families(Exposition& ex, const Snapshot& s) {
    Family& nvme_comp = ex.add("iouscope_nvme_uring_cmd_completions_total");
    PerEntityFamilies<DeviceSnapshot> devices(ex, kDevice);
    Family& nvme_lat = ex.add("iouscope_nvme_uring_cmd_latency_seconds");
    Family& nvme_cqes = ex.add("iouscope_nvme_uring_cmd_cqes_total");
    Family& nvme_cqe_delay = ex.add("iouscope_nvme_uring_cmd_cqe_delay_seconds");
    for (const auto& d : s.devices) {
        const Labels l{{"device", d.name}};
        if (d.has_cqes) {
            nvme_cqes.counter(l, static_cast<double>(d.cqes));
            nvme_cqe_delay.histogram(l, d.cqe_delay);
        }
        nvme_comp.counter({{"device", d.name}, {"polled", "true"}}, static_cast<double>(d.polled));
        nvme_comp.counter({{"device", d.name}, {"polled", "false"}}, static_cast<double>(d.irq));
        devices.add(l, d);
        nvme_lat.histogram(l, d.latency);
    }

    PerEntityFamilies<IopollSnapshot> host(ex, kHostIopoll);
    for (const auto& io : s.iopoll_host) host.add({{"caller", io.caller}}, io);
}

// A duty-cycled probe's schedule and what it recorded (collect/gap_duty.hpp).
constexpr PerEntity<GapSampling> kDuty[] = {
    {"iouscope_probe_duty_ratio",
     [](const GapSampling& g) {
         return g.period_seconds > 0 ? g.on_seconds / g.period_seconds : 1;
     }},
    {"iouscope_probe_window_active", field<&GapSampling::active>},
    {"iouscope_probe_windows_total", field<&GapSampling::windows>},
    {"iouscope_probe_windows_closed_early_total", field<&GapSampling::closed_early>},
    {"iouscope_probe_attached_seconds_total", field<&GapSampling::attached_seconds>},
    {"iouscope_probe_recorded_seconds_total", field<&GapSampling::recorded_seconds>},
    {"iouscope_probe_window_attach_failures_total", field<&GapSampling::attach_failures>},
};

void duty_families(Exposition& ex, const Snapshot& s) {
    PerEntityFamilies<GapSampling> duty(ex, kDuty);
    if (s.gap_sampling) duty.add({{"probe", "work_gaps"}}, *s.gap_sampling);
}

// Each probe's state, misses and coverage.
void probe_families(Exposition& ex, const Snapshot& s) {
    Family& probe = ex.add("iouscope_probe_attached");
    Family& missed = ex.add("iouscope_probe_missed_total");
    Family& coverage = ex.add("iouscope_probe_coverage_ratio");
    Family& coverage_events = ex.add("iouscope_probe_coverage_sqes_total");
    for (const auto& c : s.coverage) {
        if (c.ratio >= 0) coverage.gauge({{"probe", c.probe}}, c.ratio);
        coverage_events.counter({{"probe", c.probe}, {"seen_by", "probe"}},
                                static_cast<double>(c.probe_events));
        coverage_events.counter({{"probe", c.probe}, {"seen_by", "iterator"}},
                                static_cast<double>(c.iterator_events));
    }
    Family& waiting = ex.add("iouscope_probe_waiting");
    Family& gated = ex.add("iouscope_probe_gated");
    for (const auto& p : s.probes) {
        const Labels l{{"probe", p.probe}, {"kind", p.kind}};
        probe.gauge(l, p.attached ? 1 : 0);
        if (!p.attached) continue;
        gated.gauge(l, p.gated ? 1 : 0);
        waiting.gauge(l, p.waiting_for.empty() ? 0 : 1);
        missed.counter(l, static_cast<double>(p.missed));
    }
    duty_families(ex, s);
}

// The advisor's findings over its window.
void advice_families(Exposition& ex, const Snapshot& s) {
    Family& finding = ex.add("iouscope_advice_finding");
    Family& saving = ex.add("iouscope_advice_predicted_cpu_saving_cores");
    for (const auto& f : s.advice.findings) {
        Labels l{{"finding", f.id},
                 {"subject", f.subject},
                 {"sq_thread", f.sq_thread > 0 ? std::to_string(f.sq_thread) : std::string()},
                 {"ring", f.ring},
                 {"device", f.device}};
        finding.gauge(l, 1);
        for (const auto& p : f.predicted)
            if (p.name == "cpu_cores_saved")
                saving.gauge({{"finding", f.id}, {"subject", f.subject}}, p.value);
    }
    Family& window = ex.add("iouscope_advice_window_seconds");
    window.gauge({}, s.advice.window_seconds);
}

// The daemon itself: maps, identities, samples, build.
void daemon_families(Exposition& ex, const Snapshot& s) {
    Family& overflow = ex.add("iouscope_map_overflow_total");
    for (const auto& [map, n] : s.map_overflows)
        overflow.counter({{"map", map}}, static_cast<double>(n));
    Family& entries_now = ex.add("iouscope_map_entries");
    for (const auto& [map, n] : s.map_entries)
        entries_now.gauge({{"map", map}}, static_cast<double>(n));
    Family& capacity = ex.add("iouscope_map_capacity");
    for (const auto& [map, n] : s.map_capacity)
        capacity.gauge({{"map", map}}, static_cast<double>(n));
    Family& replaced = ex.add("iouscope_identities_replaced_total");
    replaced.counter({{"kind", "ring"}}, static_cast<double>(s.rings_replaced));
    replaced.counter({{"kind", "sq_thread"}}, static_cast<double>(s.threads_replaced));
    Family& incomplete = ex.add("iouscope_walks_incomplete_total");
    incomplete.counter({}, static_cast<double>(s.walks_incomplete));
    ex.add("iouscope_walks_light_total").counter({}, static_cast<double>(s.walks_light));
    ex.add("iouscope_rings_carried").gauge({}, static_cast<double>(s.rings_carried));
    Family& samples = ex.add("iouscope_samples_total");
    samples.counter({}, static_cast<double>(s.seq));
    Family& duration = ex.add("iouscope_sample_duration_seconds");
    duration.gauge({}, s.sample_duration_seconds);
    Family& last = ex.add("iouscope_last_sample_timestamp_seconds");
    last.gauge({}, s.timestamp);
    Family& visible = ex.add("iouscope_host_visible");
    for (const auto& [scope, whole] : s.host_visible)
        visible.gauge({{"scope", scope}}, whole ? 1 : 0);
    Family& build = ex.add("iouscope_build_info");
    build.gauge({{"version", IOUSCOPE_VERSION}}, 1);
}

}  // namespace

namespace {

void add_sections(Exposition& ex, const Snapshot& s) {
    // Every section is listed here; one left out is also an unused function, which the build
    // reports (-Wunused-function).
    for (auto* section :
         {thread_cpu_families, thread_wake_families, thread_info_families, thread_pass_families,
          process_families, ring_families, ring_iopoll_families, ring_request_families,
          iowq_families, ring_fold_families, ring_count_families, device_families, probe_families,
          advice_families, daemon_families})
        section(ex, s);
}

}  // namespace

std::vector<prometheus::MetricFamily> to_metric_families(const Snapshot& s) {
    Exposition ex(ExpositionTarget::families);
    add_sections(ex, s);
    return ex.families();
}

std::string render_text(const Snapshot& s) {
    Exposition ex(ExpositionTarget::text);
    add_sections(ex, s);
    return ex.text();
}

}  // namespace iouscope
