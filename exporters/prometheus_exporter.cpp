#include "exporters/prometheus_exporter.hpp"

#include <prometheus/text_serializer.h>

#include <deque>
#include <limits>
#include <map>
#include <sstream>

namespace uringscope {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

class Family {
public:
    Family(std::string name, std::string help, MetricType type) {
        f_.name = std::move(name);
        f_.help = std::move(help);
        f_.type = type;
    }
    ClientMetric& add(Labels labels) {
        for (auto& l : labels) l.value = sanitize_utf8(l.value);
        auto& m = f_.metric.emplace_back();
        m.label = std::move(labels);
        return m;
    }
    void counter(Labels labels, double v) { add(std::move(labels)).counter.value = v; }
    void gauge(Labels labels, double v) { add(std::move(labels)).gauge.value = v; }
    void histogram(Labels labels, const LatencyHistogram& h) {
        auto& m = add(std::move(labels));
        m.histogram.sample_count = h.count;
        m.histogram.sample_sum = h.sum_s;
        for (std::size_t i = 0; i < h.upper_bounds_s.size(); ++i)
            m.histogram.bucket.push_back({h.cumulative[i], h.upper_bounds_s[i]});
        m.histogram.bucket.push_back({h.count, std::numeric_limits<double>::infinity()});
    }
    void move_into(std::vector<MetricFamily>& out) {
        // Families without series are left out, as the Go client does; a scrape of a host with no
        // rings is then short rather than full of HELP lines.
        if (!f_.metric.empty()) out.push_back(std::move(f_));
    }

private:
    MetricFamily f_;
};

// The families of one exposition, in the order they were added. A family exists by being added,
// so none can be declared and then left out of the output.
class Exposition {
public:
    Family& add(std::string name, std::string help, MetricType type) {
        return families_.emplace_back(std::move(name), std::move(help), type);
    }
    std::vector<MetricFamily> take() {
        std::vector<MetricFamily> out;
        for (auto& f : families_) f.move_into(out);
        families_.clear();
        return out;
    }

private:
    std::deque<Family> families_;  // stable references while more are added
};

Labels thread_labels(const ThreadSnapshot& t) {
    return {{"sq_thread", std::to_string(t.tid)}, {"pid", std::to_string(t.pid)}, {"comm", t.comm}};
}

Labels ring_labels(const RingSnapshot& r) {
    return {{"ring", r.id},
            {"pid", std::to_string(r.pid)},
            {"comm", r.comm},
            {"mode", r.mode},
            {"sq_thread", r.sq_thread > 0 ? std::to_string(r.sq_thread) : std::string()}};
}

}  // namespace

std::string sanitize_utf8(std::string_view in) {
    // Hand-written: the only library on the dependency list that validates UTF-8 is ICU, far too
    // heavy for 16-byte names. Follows RFC 3629 (no overlongs, no surrogates, max U+10FFFF).
    std::string out;
    out.reserve(in.size());
    std::size_t i = 0;
    while (i < in.size()) {
        auto c = static_cast<unsigned char>(in[i]);
        std::size_t len = c < 0x80           ? 1
                          : (c >> 5) == 0x6  ? 2
                          : (c >> 4) == 0xE  ? 3
                          : (c >> 3) == 0x1E ? 4
                                             : 0;
        bool ok = len != 0 && i + len <= in.size();
        for (std::size_t k = 1; ok && k < len; ++k)
            ok = (static_cast<unsigned char>(in[i + k]) & 0xC0) == 0x80;
        if (ok && len > 1) {
            std::uint32_t cp = c & (0xFF >> (len + 1));
            for (std::size_t k = 1; k < len; ++k)
                cp = (cp << 6) | (static_cast<unsigned char>(in[i + k]) & 0x3F);
            static constexpr std::uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
            ok = cp >= min_cp[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
        }
        if (ok) {
            out.append(in.substr(i, len));
            i += len;
        } else {
            out.append("\xEF\xBF\xBD");
            ++i;
        }
    }
    return out;
}

namespace {

// Per SQ thread: its CPU split into work, spin and sleep, and how the split was made.
void thread_cpu_families(Exposition& ex, const Snapshot& s) {
    const auto C = MetricType::Counter;
    const auto G = MetricType::Gauge;
    Family& cpu = ex.add("uringscope_sqthread_cpu_seconds_total",
                         "CPU time used by the SQ thread since it started.", C);
    Family& work =
        ex.add("uringscope_sqthread_work_seconds_total",
               "SQ thread CPU time spent doing work (submitting, reaping, task work); see "
               "uringscope_sqthread_work_time_source.",
               C);
    Family& spin = ex.add("uringscope_sqthread_spin_seconds_total",
                          "SQ thread CPU time spent polling idle rings: CPU minus work.", C);
    Family& sleep = ex.add("uringscope_sqthread_sleep_seconds_total",
                           "Time the SQ thread spent in idle sleeps since uringscope attached.", C);
    Family& blocks =
        ex.add("uringscope_sqthread_blocks_total",
               "Times the SQ thread blocked other than in its idle sleep since uringscope "
               "attached: waits on sqd->lock, parking (ring exit, io-wq registration), I/O a "
               "submission waited for. They charge no idle spin.",
               C);
    Family& blocked =
        ex.add("uringscope_sqthread_blocked_seconds_total",
               "Time the SQ thread spent blocked (see uringscope_sqthread_blocks_total).", C);
    Family& model =
        ex.add("uringscope_sqthread_spin_model",
               "1 for how the estimate charges spin to each idle sleep on this kernel: "
               "after_last_work (5.11+: sq_thread_idle plus half a tick after the last work), "
               "after_wakeup (5.10: counted from the wakeup, an upper bound), ns (nanosecond "
               "idle, no tick). Absent while HZ is being measured.",
               G);
    Family& source =
        ex.add("uringscope_sqthread_work_time_source",
               "1 for the source of the work/spin split, the best this kernel and tier give: "
               "loop_passes (deep tier, 6.9+: the loop passes that served a ring, timed), "
               "kernel (per-thread sqd->work_time, tick-sampled), submit_and_poll (deep tier: "
               "io_submit_sqes and io_do_iopoll time), estimate.",
               G);
    Family& by_source =
        ex.add("uringscope_sqthread_work_by_source_seconds_total",
               "SQ thread work as each available source counts it, side by side (see "
               "uringscope_sqthread_work_time_source): the estimate and kernel since the "
               "thread started, the deep tier's since uringscope attached. Compare rates.",
               C);

    for (const auto& t : s.threads) {
        auto l = thread_labels(t);
        cpu.counter(l, t.cpu_seconds);
        // Until HZ is known a jiffies idle setting splits nothing: no series beats a wrong one.
        if (t.split_known) {
            work.counter(l, t.work_seconds);
            spin.counter(l, t.spin_seconds);
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
        sleep.counter(l, t.sleep_seconds);
        blocks.counter(l, static_cast<double>(t.blocks));
        blocked.counter(l, t.block_seconds);
    }
}

// Per SQ thread: sleeps, wakeups and who woke it, context switches, wake latency.
void thread_wake_families(Exposition& ex, const Snapshot& s) {
    const auto C = MetricType::Counter;
    Family& sleeps =
        ex.add("uringscope_sqthread_sleeps_total",
               "Idle sleeps of the SQ thread since uringscope attached: its loop found no "
               "work for sq_thread_idle and slept until woken.",
               C);
    Family& wakeups = ex.add("uringscope_sqthread_wakeups_total",
                             "Times the SQ thread was woken since uringscope attached.", C);
    Family& vcsw = ex.add("uringscope_sqthread_voluntary_switches_total",
                          "Voluntary context switches of the SQ thread since it started.", C);
    Family& ivcsw =
        ex.add("uringscope_sqthread_involuntary_switches_total",
               "Involuntary context switches (preemptions) of the SQ thread since it started.", C);
    Family& by_waker = ex.add("uringscope_sqthread_wakeups_by_waker_total",
                              "Wakeups of the SQ thread by the waking process, or by an interrupt "
                              "(waker_context=\"irq\", waker_pid=\"0\"): a "
                              "completion's task work, a timeout.",
                              C);
    Family& latency =
        ex.add("uringscope_sqthread_wakeup_latency_seconds",
               "Time from the SQ thread's wakeup until it ran on a CPU.", MetricType::Histogram);

    for (const auto& t : s.threads) {
        auto l = thread_labels(t);
        sleeps.counter(l, static_cast<double>(t.sleeps));
        wakeups.counter(l, static_cast<double>(t.wakeups));
        vcsw.counter(l, static_cast<double>(t.voluntary_switches));
        ivcsw.counter(l, static_cast<double>(t.involuntary_switches));
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
void thread_info_families(Exposition& ex, const Snapshot& s) {
    const auto G = MetricType::Gauge;
    Family& rings = ex.add("uringscope_sqthread_rings", "Rings served by the SQ thread.", G);
    Family& fairness =
        ex.add("uringscope_sqthread_fairness",
               "Jain's fairness index of SQEs served among the thread's rings that had "
               "demand in the last sample interval (1 = equal, 1/n = one ring took all).",
               G);
    Family& thread_start =
        ex.add("uringscope_sqthread_start_time_seconds",
               "Unix time the SQ thread started. A tid is reused once its thread exits: "
               "when this changes under the same labels, the counters restart from the "
               "new thread's own (a counter reset, never a jump).",
               G);
    Family& idle =
        ex.add("uringscope_sqthread_idle_setting_seconds",
               "sq_thread_idle: how long the thread polls idle rings before sleeping.", G);
    Family& running =
        ex.add("uringscope_sqthread_running",
               "1 if the SQ thread was running or runnable at the last sample, 0 if asleep.", G);
    Family& sq_cpu = ex.add("uringscope_sqthread_sq_cpu",
                            "sqd->sq_cpu: the CPU the SQ thread is pinned to (pinned=\"true\", "
                            "IORING_SETUP_SQ_AFF), or on newer kernels the CPU it last started on.",
                            G);

    for (const auto& t : s.threads) {
        auto l = thread_labels(t);
        rings.gauge(l, static_cast<double>(t.rings));
        fairness.gauge(l, t.fairness);
        idle.gauge(l, t.idle_setting_seconds);
        thread_start.gauge(l, t.start_time_seconds);
        running.gauge(l, t.state == 0 ? 1 : 0);
        if (t.sq_cpu >= 0) {
            auto lc = l;
            lc.push_back({"pinned", t.pinned ? "true" : "false"});
            sq_cpu.gauge(lc, t.sq_cpu);
        }
    }
}

// Per SQ thread: its loop passes and their work (deep tier, 6.9+).
void thread_pass_families(Exposition& ex, const Snapshot& s) {
    const auto C = MetricType::Counter;
    Family& passes =
        ex.add("uringscope_sqthread_loop_passes_total",
               "Passes of the SQ thread's loop over its rings since uringscope attached. Deep "
               "tier, kernels with io_sq_tw (6.9+).",
               C);
    Family& busy_passes =
        ex.add("uringscope_sqthread_busy_loop_passes_total",
               "Loop passes that served a ring or ran task work; the rest polled idle "
               "rings. Deep tier.",
               C);
    Family& pass_work =
        ex.add("uringscope_sqthread_pass_work_seconds_total",
               "On-CPU time of the loop passes that served a ring, from the first ring's "
               "work to the end of the pass: the kernel's work-time bracket, measured with "
               "the monotonic clock. Deep tier.",
               C);
    Family& task_work =
        ex.add("uringscope_sqthread_task_work_seconds_total",
               "The part of the pass work spent in io_sq_tw running task work: under "
               "SQPOLL the completions of every ring the thread serves, charged to none of "
               "them. The rings' uringscope_ring_sqthread_work_seconds_total and this add up "
               "to the pass work. Deep tier, 6.9+.",
               C);

    for (const auto& t : s.threads) {
        if (!t.has_passes) continue;
        auto l = thread_labels(t);
        passes.counter(l, static_cast<double>(t.loop_passes));
        busy_passes.counter(l, static_cast<double>(t.busy_passes));
        pass_work.counter(l, t.pass_work_seconds);
        task_work.counter(l, t.task_work_seconds);
    }
}

// Per ring: SQEs and CQEs, backlog, share of its SQ thread, and the SQ thread's work on it
// (deep tier).
void ring_families(Exposition& ex, const Snapshot& s) {
    const auto C = MetricType::Counter;
    const auto G = MetricType::Gauge;
    Family& sqes =
        ex.add("uringscope_ring_sqes_total", "SQEs consumed by the ring since it was created.", C);
    Family& cqes =
        ex.add("uringscope_ring_cqes_total", "CQEs posted by the ring since it was created.", C);
    Family& backlog =
        ex.add("uringscope_ring_sq_backlog",
               "SQEs the application has queued that the kernel has not consumed yet.", G);
    Family& share =
        ex.add("uringscope_ring_sqthread_share",
               "The ring's share of its SQ thread's SQEs in the last sample interval.", G);
    Family& entries =
        ex.add("uringscope_ring_sq_entries", "Size of the ring's submission queue.", G);
    Family& start =
        ex.add("uringscope_ring_start_time_seconds",
               "Unix time the ring was created (or first seen, if it predates uringscope). "
               "When a ring closes and a new one gets the same pid:fd, its counters restart "
               "from zero and this changes: a counter reset, never a jump.",
               G);
    Family& ring_work =
        ex.add("uringscope_ring_sqthread_work_seconds_total",
               "SQ thread on-CPU time spent on this ring. Where uringscope_probe_attached"
               "{probe=\"loop_passes\"} is 1: the ring's turns in the thread's loop passes, "
               "which add up to uringscope_sqthread_pass_work_seconds_total; elsewhere its "
               "time submitting (io_submit_sqes) and polling (io_do_iopoll). Deep tier.",
               C);
    Family& ring_submit =
        ex.add("uringscope_ring_sqthread_submit_seconds_total",
               "SQ thread time inside io_submit_sqes for this ring. Deep tier.", C);
    Family& ring_batches =
        ex.add("uringscope_ring_sqthread_batches_total",
               "io_submit_sqes calls made by the SQ thread for this ring. Deep tier.", C);

    for (const auto& r : s.rings) {
        auto l = ring_labels(r);
        sqes.counter(l, static_cast<double>(r.sqes_total));
        cqes.counter(l, static_cast<double>(r.cqes_total));
        backlog.gauge(l, r.sq_backlog);
        if (r.sq_thread > 0) share.gauge(l, r.sqthread_share);
        entries.gauge(l, r.sq_entries);
        start.gauge(l, r.start_time_seconds);
        if (r.has_sqthread_work) {
            ring_work.counter(l, r.sqthread_work_seconds);
            ring_submit.counter(l, r.sqthread_submit_seconds);
            ring_batches.counter(l, static_cast<double>(r.sqthread_batches));
        }
    }
}

// Per ring and caller: io_do_iopoll calls, empty calls, completions and time (deep tier).
void ring_iopoll_families(Exposition& ex, const Snapshot& s) {
    const auto C = MetricType::Counter;
    Family& io_calls =
        ex.add("uringscope_iopoll_calls_total", "io_do_iopoll calls on the ring. Deep tier.", C);
    Family& io_empty = ex.add("uringscope_iopoll_empty_total",
                              "io_do_iopoll calls that reaped nothing: spinning. Deep tier.", C);
    Family& io_comp = ex.add("uringscope_iopoll_completions_total",
                             "Completions reaped by io_do_iopoll. Deep tier.", C);
    Family& io_secs =
        ex.add("uringscope_iopoll_seconds_total", "Time spent in io_do_iopoll. Deep tier.", C);

    for (const auto& r : s.rings) {
        for (const auto& io : r.iopoll) {
            Labels li{{"ring", r.id},
                      {"pid", std::to_string(r.pid)},
                      {"comm", r.comm},
                      {"caller", io.caller}};
            io_calls.counter(li, static_cast<double>(io.calls));
            io_empty.counter(li, static_cast<double>(io.empty));
            io_comp.counter(li, static_cast<double>(io.completions));
            io_secs.counter(li, io.seconds);
        }
    }
}

// Rings by mode: live now, created and short-lived since attach.
void ring_count_families(Exposition& ex, const Snapshot& s) {
    const auto C = MetricType::Counter;
    const auto G = MetricType::Gauge;
    std::map<std::string, int> by_mode = {{"plain", 0}, {"sqpoll", 0}, {"iopoll", 0}, {"both", 0}};
    for (const auto& r : s.rings) ++by_mode[r.mode];
    Family& rings_by_mode = ex.add("uringscope_rings", "Live io_uring instances by mode.", G);
    for (const auto& [mode, n] : by_mode) rings_by_mode.gauge({{"mode", mode}}, n);
    Family& created =
        ex.add("uringscope_rings_created_total",
               "Rings created since uringscope attached, from the io_uring_create tracepoint.", C);
    for (const auto& [mode, n] : s.rings_created_by_mode)
        created.counter({{"mode", mode}}, static_cast<double>(n));
    Family& short_lived =
        ex.add("uringscope_rings_short_lived_total",
               "Rings created and destroyed between two samples: never walked, so their "
               "counts are not in uringscope_ring_*.",
               C);
    for (const auto& [mode, n] : s.rings_short_lived_by_mode)
        short_lived.counter({{"mode", mode}}, static_cast<double>(n));
}

// Per NVMe namespace (deep tier), and IOPOLL totals over every ring since attach.
void device_families(Exposition& ex, const Snapshot& s) {
    const auto C = MetricType::Counter;
    const auto G = MetricType::Gauge;
    Family& nvme_comp =
        ex.add("uringscope_nvme_uring_cmd_completions_total",
               "NVMe passthrough (uring_cmd) completions, by whether the request sat on a "
               "poll queue. Deep tier.",
               C);
    Family& nvme_polls = ex.add("uringscope_nvme_uring_cmd_polls_total",
                                "nvme_ns_chr_uring_cmd_iopoll calls: poll attempts. Deep tier.", C);
    Family& nvme_intent =
        ex.add("uringscope_nvme_uring_cmd_polled_irq_total",
               "Requests that asked to be polled but were completed by an interrupt.", C);
    Family& no_pollq =
        ex.add("uringscope_device_iopoll_without_poll_queues",
               "1 if polled requests to the device were completed by interrupts in the last "
               "minute: it has no poll queues (nvme poll_queues=0).",
               G);
    Family& nvme_lat =
        ex.add("uringscope_nvme_uring_cmd_latency_seconds",
               "NVMe passthrough request latency, from request start to end_io. Deep tier.",
               MetricType::Histogram);
    Family& nvme_cqes =
        ex.add("uringscope_nvme_uring_cmd_cqes_total",
               "NVMe passthrough completions handed to io_uring (io_uring_cmd_done). Deep "
               "tier.",
               C);
    Family& nvme_cqe_delay =
        ex.add("uringscope_nvme_uring_cmd_cqe_delay_seconds",
               "Time from a passthrough request's end_io to io_uring_cmd_done: the "
               "task-work hop before its CQE. Deep tier.",
               MetricType::Histogram);
    for (const auto& d : s.devices) {
        if (d.has_cqes) {
            nvme_cqes.counter({{"device", d.name}}, static_cast<double>(d.cqes));
            nvme_cqe_delay.histogram({{"device", d.name}}, d.cqe_delay);
        }
        nvme_comp.counter({{"device", d.name}, {"polled", "true"}}, static_cast<double>(d.polled));
        nvme_comp.counter({{"device", d.name}, {"polled", "false"}}, static_cast<double>(d.irq));
        nvme_polls.counter({{"device", d.name}}, static_cast<double>(d.polls));
        nvme_intent.counter({{"device", d.name}}, static_cast<double>(d.polled_intent_irq));
        no_pollq.gauge({{"device", d.name}}, d.iopoll_without_poll_queues ? 1 : 0);
        nvme_lat.histogram({{"device", d.name}}, d.latency);
    }

    Family& host_calls =
        ex.add("uringscope_iopoll_host_calls_total",
               "io_do_iopoll calls on every ring since attach, closed rings included.", C);
    Family& host_empty = ex.add("uringscope_iopoll_host_empty_total",
                                "Empty io_do_iopoll calls on every ring since attach.", C);
    Family& host_comp = ex.add("uringscope_iopoll_host_completions_total",
                               "Completions reaped by io_do_iopoll on every ring since attach.", C);
    for (const auto& io : s.iopoll_host) {
        host_calls.counter({{"caller", io.caller}}, static_cast<double>(io.calls));
        host_empty.counter({{"caller", io.caller}}, static_cast<double>(io.empty));
        host_comp.counter({{"caller", io.caller}}, static_cast<double>(io.completions));
    }
}

// Each probe's state, misses and coverage.
void probe_families(Exposition& ex, const Snapshot& s) {
    const auto C = MetricType::Counter;
    const auto G = MetricType::Gauge;
    Family& probe =
        ex.add("uringscope_probe_attached",
               "1 if the BPF program is attached, 0 if it is off (see the log for why).", G);
    Family& missed =
        ex.add("uringscope_probe_missed_total",
               "Runs of an attached probe the kernel skipped because another BPF program was "
               "running on the CPU (kprobes hit from interrupts): its counts are short by "
               "this much.",
               C);
    Family& coverage =
        ex.add("uringscope_probe_coverage_ratio",
               "SQEs a deep probe saw submitted over the SQEs the rings' heads passed, on "
               "SQPOLL rings, over the last sample interval (absent below 100 SQEs). Under 1: "
               "the probe is attached but misses call sites (a partially inlined function).",
               G);
    Family& coverage_events =
        ex.add("uringscope_probe_coverage_sqes_total",
               "The two sides of uringscope_probe_coverage_ratio, cumulative: "
               "seen_by=\"probe\" or \"iterator\".",
               C);
    for (const auto& c : s.coverage) {
        if (c.ratio >= 0) coverage.gauge({{"probe", c.probe}}, c.ratio);
        coverage_events.counter({{"probe", c.probe}, {"seen_by", "probe"}},
                                static_cast<double>(c.probe_events));
        coverage_events.counter({{"probe", c.probe}, {"seen_by", "iterator"}},
                                static_cast<double>(c.iterator_events));
    }
    Family& waiting =
        ex.add("uringscope_probe_waiting",
               "1 while an attached probe waits for a kernel module to load before it can "
               "see anything: the NVMe tracepoint variant until nvme_core is loaded (the log names "
               "the module).",
               G);
    for (const auto& p : s.probes) {
        probe.gauge({{"probe", p.probe}, {"kind", p.kind}}, p.attached ? 1 : 0);
        if (p.attached)
            waiting.gauge({{"probe", p.probe}, {"kind", p.kind}}, p.waiting_for.empty() ? 0 : 1);
        if (p.attached)
            missed.counter({{"probe", p.probe}, {"kind", p.kind}}, static_cast<double>(p.missed));
    }
}

// The advisor's findings over its window.
void advice_families(Exposition& ex, const Snapshot& s) {
    const auto G = MetricType::Gauge;
    Family& finding =
        ex.add("uringscope_advice_finding",
               "1 for each tuning finding of the advisor over its window (uringscope advise "
               "explains it). The finding label is stable: sq_idle_too_long, "
               "sq_spinning_without_work, shared_thread_backlog, sq_threads_should_share, "
               "iopoll_without_poll_queues.",
               G);
    Family& saving =
        ex.add("uringscope_advice_predicted_cpu_saving_cores",
               "CPU (cores) the advisor predicts its recommended change would save.", G);
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
    Family& window =
        ex.add("uringscope_advice_window_seconds",
               "Length of the window the advisor judged; 0 while it has too little data.", G);
    window.gauge({}, s.advice.window_seconds);
}

// The daemon itself: maps, identities, samples, build.
void daemon_families(Exposition& ex, const Snapshot& s) {
    const auto C = MetricType::Counter;
    const auto G = MetricType::Gauge;
    Family& overflow =
        ex.add("uringscope_map_overflow_total",
               "Entries a bounded BPF map could not take; non-zero means data was lost.", C);
    for (const auto& [map, n] : s.map_overflows)
        overflow.counter({{"map", map}}, static_cast<double>(n));
    Family& entries_now =
        ex.add("uringscope_map_entries",
               "Entries in each bounded BPF map at the last sample; they must stay flat "
               "when rings and threads come and go.",
               G);
    for (const auto& [map, n] : s.map_entries)
        entries_now.gauge({{"map", map}}, static_cast<double>(n));
    Family& replaced =
        ex.add("uringscope_identities_replaced_total",
               "Rings that took a closed ring's kernel address, and SQ threads that took an "
               "exited thread's tid: each started from its own counts.",
               C);
    replaced.counter({{"kind", "ring"}}, static_cast<double>(s.rings_replaced));
    replaced.counter({{"kind", "sq_thread"}}, static_cast<double>(s.threads_replaced));
    Family& incomplete =
        ex.add("uringscope_walks_incomplete_total",
               "Ring walks that stopped before the end of the task list (an error); rings "
               "they did not reach kept their state.",
               C);
    incomplete.counter({}, static_cast<double>(s.walks_incomplete));
    Family& samples =
        ex.add("uringscope_samples_total", "Samples taken since the daemon started.", C);
    samples.counter({}, static_cast<double>(s.seq));
    Family& duration = ex.add("uringscope_sample_duration_seconds",
                              "Time the last sample took: iterator walk plus map reads.", G);
    duration.gauge({}, s.sample_duration_seconds);
    Family& last =
        ex.add("uringscope_last_sample_timestamp_seconds", "Unix time of the last sample.", G);
    last.gauge({}, s.timestamp);
    Family& build = ex.add("uringscope_build_info", "Version of uringscope, always 1.", G);
    build.gauge({{"version", URINGSCOPE_VERSION}}, 1);
}

}  // namespace

std::vector<MetricFamily> to_metric_families(const Snapshot& s) {
    // Every section is listed here; one left out is also an unused function, which the build
    // reports (-Wunused-function).
    Exposition ex;
    for (auto* section :
         {thread_cpu_families, thread_wake_families, thread_info_families, thread_pass_families,
          ring_families, ring_iopoll_families, ring_count_families, device_families, probe_families,
          advice_families, daemon_families})
        section(ex, s);
    return ex.take();
}

std::string render_text(const Snapshot& snap) {
    std::ostringstream os;
    prometheus::TextSerializer{}.Serialize(os, to_metric_families(snap));
    return os.str();
}

}  // namespace uringscope
