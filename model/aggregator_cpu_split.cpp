// An SQ thread's CPU split into work and spin: the spin model of its loop, the kernel's
// work_time, the deep tier's loop passes or submit and poll time, and the estimate kept beside
// whichever rules (ThreadSnapshot::work_source).
#include <algorithm>

#include "model/aggregator_update.hpp"

namespace iouscope {

SpinModel spin_model(const iou_ring_record& r, unsigned hz) {
    if (r.sq_idle_unit == IOU_IDLE_NS) return {"ns", r.sq_thread_idle, true};
    if (hz == 0) return {"", 0, false};
    // The loop sleeps once time_after(jiffies, timeout): between idle and idle + 1 tick after
    // the moment the timeout was set, half a tick over on average.
    const std::uint64_t tick_ns = 1'000'000'000ull / hz;
    const std::uint64_t per_sleep = r.sq_thread_idle * tick_ns + tick_ns / 2;
    return {(r.caps & IOU_CAP_IDLE_IN_SQD) ? "after_last_work" : "after_wakeup", per_sleep, true};
}

const char* to_string(WorkSource s) {
    switch (s) {
        case WorkSource::kernel:
            return "kernel";
        case WorkSource::loop_passes:
            return "loop_passes";
        case WorkSource::submit_and_poll:
            return "submit_and_poll";
        case WorkSource::estimate:
            break;
    }
    return "estimate";
}

// The thread's CPU split into work and spin, from the best source the kernel and the attached
// probes offer (ts.work_source), with the estimate kept beside it (ts.work_by_source_seconds).
void Aggregator::split_thread_cpu(const RawSample& raw, const iou_ring_record& rec, ThreadState& st,
                                  const MemberTotals& m, const iou_sq_passes* passes,
                                  std::uint64_t cpu_ns, ThreadSnapshot& ts) {
    const std::uint64_t pass_work = passes ? passes->work_ns : 0;
    const std::uint64_t dpass = pass_work - std::min(pass_work, st.prev_pass_work_ns);
    st.prev_pass_work_ns = pass_work;
    const bool kernel_work = raw.kernel.work_time_per_thread && (rec.caps & IOU_CAP_WORK_TIME) != 0;
    // The loop passes are timed on the monotonic clock; the kernel's work_time is built from
    // tick-sampled cputime, which short passes fall between (a quarter to all of the
    // passes' time on the same loads in the guests, docs/BENCHMARKS.md).
    ts.work_source = raw.ring_turns     ? WorkSource::loop_passes
                     : kernel_work      ? WorkSource::kernel
                     : raw.submit_probe ? WorkSource::submit_and_poll
                                        : WorkSource::estimate;
    const SpinModel model = spin_model(rec, hz_);
    ts.spin_model = model.name;
    // A jiffies idle setting means nothing until HZ is known: splitting before would book
    // the thread's whole history as work (an idle of 0) on the first sample.
    ts.split_known = ts.work_source == WorkSource::kernel || model.known;
    const std::uint64_t dcpu = cpu_ns - std::min(cpu_ns, st.prev_cpu_ns);
    const CpuSplit estimate = advance_estimate(st, model, m, cpu_ns, dcpu, ts.sleeps);
    const std::uint64_t work_time_ns = rec.work_time_us * 1000;
    if (ts.work_source == WorkSource::kernel) {
        kernel_split(st, cpu_ns, work_time_ns);
    } else if (!ts.split_known) {
        // Left at zero; the first sample with HZ splits the whole history.
    } else if (!st.split_started) {
        // The history is the estimate's: the deep tier only measures from now on.
        st.work_ns = st.estimate_work_ns;
        st.spin_ns = cpu_ns - std::min(cpu_ns, st.work_ns);
        st.split_started = true;
    } else {
        // The deep tier measures the interval's work; the estimate only infers it.
        CpuSplit split = estimate;
        if (ts.work_source == WorkSource::loop_passes)
            split = split_with_work_time(dcpu, dpass);
        else if (ts.work_source == WorkSource::submit_and_poll)
            split = split_with_work_time(dcpu, m.deep_work_ns);
        st.work_ns += split.work_ns;
        st.spin_ns += split.spin_ns;
    }
    st.prev_kernel = ts.work_source == WorkSource::kernel;
    st.prev_work_time_ns = work_time_ns;
    st.submit_poll_work_ns += m.deep_work_ns;
    if (kernel_work)
        ts.work_by_source_seconds.emplace_back(
            WorkSource::kernel, split_with_work_time(cpu_ns, work_time_ns).work_ns / 1e9);
    if (raw.ring_turns)
        ts.work_by_source_seconds.emplace_back(WorkSource::loop_passes, pass_work / 1e9);
    if (raw.submit_probe)
        ts.work_by_source_seconds.emplace_back(WorkSource::submit_and_poll,
                                               st.submit_poll_work_ns / 1e9);
    if (ts.split_known)
        ts.work_by_source_seconds.emplace_back(WorkSource::estimate, st.estimate_work_ns / 1e9);
}

// Work from the kernel's work_time. Over a thread's whole life when the split starts with it;
// from the switch on when another source split the history first (see kernel_offset_ns).
void Aggregator::kernel_split(ThreadState& st, std::uint64_t cpu_ns, std::uint64_t work_time_ns) {
    if (st.split_started && !st.prev_kernel)
        st.kernel_offset_ns =
            static_cast<std::int64_t>(st.work_ns) - static_cast<std::int64_t>(st.prev_work_time_ns);
    const std::int64_t target = static_cast<std::int64_t>(work_time_ns) + st.kernel_offset_ns;
    const auto work = static_cast<std::uint64_t>(std::max<std::int64_t>(0, target));
    st.work_ns = std::max(st.work_ns, std::min(work, cpu_ns));
    st.spin_ns = std::max(st.spin_ns, cpu_ns - std::min(cpu_ns, st.work_ns));
    st.split_started = true;
}

// The estimate runs whichever source rules, so that all can be shown side by side. Returns the
// interval's share of it (the whole history on the first sample it can run).
CpuSplit Aggregator::advance_estimate(ThreadState& st, const SpinModel& model,
                                      const MemberTotals& m, std::uint64_t cpu_ns,
                                      std::uint64_t dcpu, std::uint64_t sleeps) {
    CpuSplit estimate{};
    if (model.known && !st.estimate_started) {
        // The CPU the thread used before the estimate started, with its idle sleeps so far
        // (its voluntary switches, without the tracepoints).
        estimate = estimate_split(cpu_ns, sleeps, model.spin_per_sleep_ns, m.sqes_total > 0);
        st.estimate_started = true;
    } else if (model.known) {
        const std::uint64_t dsleeps = sleeps - std::min(sleeps, st.prev_sleeps);
        estimate = estimate_split(dcpu, dsleeps, model.spin_per_sleep_ns, m.sqes + m.cqes > 0);
    }
    st.estimate_work_ns += estimate.work_ns;
    return estimate;
}

}  // namespace iouscope
